// copy_range — dst[dstOffset + i] = src[srcOffset + i] for i < n: a contiguous range between two
// buffers at any element offsets (WebGPU binding offsets must be 256-byte aligned, so slicing rows of
// an activation cannot be a view). Used to split a fused q/k/v projection and to scatter its gradient.
// Bindings: 0 uniform Params, 1 src, 2 dst. Dispatch grid1d(n, WG).
struct Params { n: u32, rowStride: u32, srcOffset: u32, dstOffset: u32 }

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  dst[p.dstOffset + i] = src[p.srcOffset + i];
}
