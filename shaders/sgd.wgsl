// sgd — in-place SGD with momentum (optionally Nesterov) and L2 weight decay over a flat vector.
// g' = g + wd·w; v = μ·v + g'; w −= lr·(nesterov ? g' + μ·v : v).
// Works on vec4s (n = vec4 count; flat vectors are padded to 64 floats).
// Bindings: 0 uniform Params, 1 w, 2 g, 3 v. Dispatch (ceil(n / (WG·rows)), rows).
struct Params { n: u32, rowStride: u32, lr: f32, momentum: f32, weightDecay: f32, nesterov: u32 }

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> w: array<vec4f>;
@group(0) @binding(2) var<storage, read> g: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> v: array<vec4f>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  let grad = g[i] + p.weightDecay * w[i];
  let vel = p.momentum * v[i] + grad;
  v[i] = vel;
  var step = vel;
  if (p.nesterov != 0u) { step = grad + p.momentum * vel; }
  w[i] = w[i] - p.lr * step;
}
