// permute — reorders the dims of a rank ≤ 4 tensor: out dim i is input dim perm[i]. Moves 32-bit
// words, so it serves f32 and i32 data alike.
// x [shape] → out [shape[perm[0]], .., shape[perm[3]]], both right-aligned to rank 4 with leading 1s.
// Bindings: 0 uniform Params, 1 x, 2 out. One invocation per output element; dispatch grid1d(n, WG).
struct Params {
  n: u32, rowStride: u32, pad0: u32, pad1: u32,
  outShape: vec4u,
  srcStrides: vec4u, // input stride of the dim that becomes out dim i
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  let s = p.outShape;
  let i3 = i % s.w;
  let i2 = (i / s.w) % s.z;
  let i1 = (i / (s.w * s.z)) % s.y;
  let i0 = i / (s.w * s.z * s.y);
  out[i] = x[dot(vec4u(i0, i1, i2, i3), p.srcStrides)];
}
