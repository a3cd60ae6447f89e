// fill — y[i] = value, 4 elements per invocation (n = vec4 count; bindings are rounded up to 16 bytes
// and the tail past the tensor is scratch). Bindings: 0 uniform Params, 1 y. Dispatch (ceil(n / (WG·rows)), rows).
struct Params { n: u32, rowStride: u32, value: f32 }

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<vec4f>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  y[i] = vec4f(p.value);
}
