// fill — y[i] = value. Bindings: 0 uniform Params, 1 y [n]. Dispatch (ceil(n / (WG·rows)), rows).
struct Params { n: u32, rowStride: u32, value: f32 }

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  y[i] = p.value;
}
