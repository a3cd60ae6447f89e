// dgc_threshold — DGC top-k threshold from the sample: the rank-th largest of `count` sample
// magnitudes (out[offset + j], non-negative f32 bits, so their u32 order is their f32 order), exactly,
// by a 4-pass MSB-first radix select (8 bits per pass, a 256-bin workgroup histogram). One workgroup.
// Writes the DGC result header: out[0] = 0 (the selected count, reset for dgc_select),
// out[1] = bits of max(that value, FLT_MIN) (the threshold; never 0, so zeros are never selected),
// out[2] = bits of the rank-th largest itself. rank is clamped to [1, count].
// Bindings: 0 uniform Params, 1 out u32 (the DGC result buffer). Dispatch (1).
struct Params { count: u32, rank: u32, offset: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

var<workgroup> hist: array<atomic<u32>, 256>;
/// (bits fixed so far, rank still to find among the candidates that share them)
var<workgroup> state: vec2u;

const FLT_MIN_BITS = 0x00800000u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
  if (lid == 0u) { state = vec2u(0u, clamp(p.rank, 1u, max(p.count, 1u))); }
  for (var digit = 0u; digit < 4u; digit++) {
    for (var b = lid; b < 256u; b += WG) { atomicStore(&hist[b], 0u); }
    workgroupBarrier();
    let shift = 24u - 8u * digit;
    let hiMask = select(~((1u << (shift + 8u)) - 1u), 0u, digit == 0u);
    let prefix = state.x & hiMask;
    for (var j = lid; j < p.count; j += WG) {
      let bits = out[p.offset + j];
      if ((bits & hiMask) == prefix) { atomicAdd(&hist[(bits >> shift) & 255u], 1u); }
    }
    workgroupBarrier();
    if (lid == 0u) {
      let want = state.y;
      var above = 0u;
      var d = 255u;
      loop {
        let c = atomicLoad(&hist[d]);
        if (above + c >= want || d == 0u) { break; }
        above += c;
        d -= 1u;
      }
      state = vec2u(state.x | (d << shift), want - above);
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let kth = select(state.x, 0u, p.count == 0u);
    out[0] = 0u;
    out[1] = max(kth, FLT_MIN_BITS);
    out[2] = kth;
  }
}
