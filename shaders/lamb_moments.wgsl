// lamb_moments — LAMB's first pass (You et al. 2019), in place over flat vectors: the AdamW moments
// m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g², and the update u = (m/c1) / (sqrt(v/c2) + ε) + wd·w
// written to `u` for lamb_norms and lamb_apply. Works on vec4s (n = vec4 count; flat vectors are
// padded to 64 floats). Bindings: 0 uniform Params, 1 w, 2 g, 3 m, 4 v, 5 u. Dispatch (ceil(n / (WG·rows)), rows).
struct Params { n: u32, rowStride: u32, beta1: f32, beta2: f32, eps: f32, weightDecay: f32, c1: f32, c2: f32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4f>;
@group(0) @binding(2) var<storage, read> g: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> m: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> v: array<vec4f>;
@group(0) @binding(5) var<storage, read_write> u: array<vec4f>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  let grad = g[i];
  let mi = p.beta1 * m[i] + (1.0 - p.beta1) * grad;
  let vi = p.beta2 * v[i] + (1.0 - p.beta2) * grad * grad;
  m[i] = mi;
  v[i] = vi;
  u[i] = (mi / p.c1) / (sqrt(vi / p.c2) + vec4f(p.eps)) + p.weightDecay * w[i];
}
