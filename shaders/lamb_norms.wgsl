// lamb_norms — LAMB's second pass: per parameter tensor s (segment [offset, offset + size) of the flat
// vectors), the L2 norms of the weights and of the update: norms[2s] = ‖w_s‖, norms[2s+1] = ‖u_s‖.
// One workgroup per tensor: each invocation sums a strided share, then a tree in workgroup memory
// (log2 WG barriers per tensor, a handful of tensors per model), in a fixed order, so the same inputs
// give the same bits on every run. Bindings: 0 uniform Params, 1 w, 2 u, 3 segments (i32 pairs
// offset, size), 4 norms. Dispatch (S, 1).
struct Params { segments: u32, pad0: u32, pad1: u32, pad2: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;
@group(0) @binding(3) var<storage, read> segments: array<i32>;
@group(0) @binding(4) var<storage, read_write> norms: array<f32>;

var<workgroup> sw: array<f32, WG>;
var<workgroup> su: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x;
  if (s >= p.segments) { return; }
  let offset = u32(segments[2u * s]);
  let size = u32(segments[2u * s + 1u]);
  var aw = 0.0;
  var au = 0.0;
  for (var k = lid; k < size; k += WG) {
    let a = w[offset + k];
    let b = u[offset + k];
    aw += a * a;
    au += b * b;
  }
  sw[lid] = aw;
  su[lid] = au;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    if (lid < half) {
      sw[lid] += sw[lid + half];
      su[lid] += su[lid + half];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    norms[2u * s] = sqrt(sw[0]);
    norms[2u * s + 1u] = sqrt(su[0]);
  }
}
