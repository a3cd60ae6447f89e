// dgc_select — DGC selection and compaction: every i < n with |v_i| ≥ thr (thr = bitcast<f32>(out[1]),
// written by dgc_threshold or the host) takes a slot from the atomic counter out[0] and, if the slot is
// below capacity, writes the pair (index u32, v_i as f32 bits) at out[pairsOffset + 2·slot]. out[0] ends as
// the number of elements that passed, which may exceed capacity (then only `capacity` pairs were stored,
// in no particular order). Pair order is nondeterministic; the host sorts by index.
// Invocation t of T = ceil(ceil(n/4) / PER_INVOCATION) reads the vec4s t, t + T, … (one threshold load
// per invocation, coalesced on GPUs) and does one atomicAdd per vec4 with any hit.
// Bindings: 0 uniform Params, 1 v [n] f32, 2 out u32 (the DGC result buffer).
// Dispatch (ceil(T / (WG·rows)), rows), t = y·rowStride + x.
struct Params { n: u32, rowStride: u32, capacity: u32, pairsOffset: u32, T: u32 }

override WG: u32 = 64u;
override PER_INVOCATION: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> v: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;

fn put(slot: u32, index: u32, value: f32) {
  if (slot < p.capacity) {
    let at = p.pairsOffset + 2u * slot;
    atomicStore(&out[at], index);
    atomicStore(&out[at + 1u], bitcast<u32>(value));
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let t = gid.y * p.rowStride + gid.x;
  let nv = (p.n + 3u) / 4u;
  if (gid.x >= p.rowStride || t >= p.T) { return; }
  let thr = vec4f(bitcast<f32>(atomicLoad(&out[1])));
  for (var r = 0u; r < PER_INVOCATION; r++) {
    let i = t + r * p.T;
    if (i >= nv) { break; }
    let x = v[i];
    let base = i * 4u;
    let lane = vec4u(base) + vec4u(0u, 1u, 2u, 3u);
    let hit = select(vec4u(0u), vec4u(1u), (abs(x) >= thr) & (lane < vec4u(p.n)));
    let count = hit.x + hit.y + hit.z + hit.w;
    if (count != 0u) {
      let s0 = atomicAdd(&out[0], count);
      let s1 = s0 + hit.x;
      let s2 = s1 + hit.y;
      let s3 = s2 + hit.z;
      if (hit.x != 0u) { put(s0, base, x.x); }
      if (hit.y != 0u) { put(s1, base + 1u, x.y); }
      if (hit.z != 0u) { put(s2, base + 2u, x.z); }
      if (hit.w != 0u) { put(s3, base + 3u, x.w); }
    }
  }
}
