// dgc_sample — DGC threshold sample: |v| at one seeded random position per stratum of `stride`
// scalars (jittered stratified sampling: unbiased, covers the whole vector, new positions per seed).
// Sample j reads v[j·stride + hash(j, seed) mod len_j], len_j = min(stride, n − j·stride), and writes
// its magnitude's bits to out[offset + j]; NaN magnitudes are written as 0 so they never set a threshold.
// hash = lowbias32(j ^ (seed · 0x9E3779B9)); the CPU reference computes the same positions.
// Bindings: 0 uniform Params, 1 v [n] f32, 2 out u32 (the DGC result buffer). Dispatch (ceil(count / WG)).
struct Params { n: u32, count: u32, stride: u32, seed: u32, offset: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

fn lowbias32(x0: u32) -> u32 {
  var x = x0;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let j = gid.x;
  if (j >= p.count) { return; }
  let start = j * p.stride;
  let len = min(p.stride, p.n - start);
  let pos = start + lowbias32(j ^ (p.seed * 0x9E3779B9u)) % len;
  let bits = bitcast<u32>(v[pos]) & 0x7fffffffu;
  out[p.offset + j] = select(bits, 0u, bits > 0x7f800000u);
}
