// attention_causal — fused causal scaled dot-product attention, forward.
// q, k, v [BH, T, D] (D = 4·D4) → o [BH, T, D] and the attention probabilities p [BH, T, T]
// (p = softmax(scale · q·kᵀ) with row t seeing keys ≤ t; masked entries 0), which backward reuses.
// Bindings: 0 uniform Params, 1 q, 2 k, 3 v, 4 o, 5 p.
// One invocation per query row (BH·T rows); dispatch grid1d(rows, WG). Rows hold their scores in p
// while they are being normalized, so no per-lane array of T (per-lane memory on CPU adapters).
struct Params { rows: u32, rowStride: u32, T: u32, D4: u32, scale: f32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4f>;
@group(0) @binding(2) var<storage, read> k: array<vec4f>;
@group(0) @binding(3) var<storage, read> v: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> o: array<vec4f>;
@group(0) @binding(5) var<storage, read_write> p: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let r = gid.y * params.rowStride + gid.x;
  if (gid.x >= params.rowStride || r >= params.rows) { return; }
  let T = params.T;
  let D4 = params.D4;
  let t = r % T;
  let qBase = r * D4;
  let kvBase = (r - t) * D4;
  let pBase = r * T;
  var m = -3.4028234663852886e38;
  for (var j = 0u; j <= t; j++) {
    var acc = vec4f(0.0);
    let kj = kvBase + j * D4;
    for (var d = 0u; d < D4; d++) { acc += q[qBase + d] * k[kj + d]; }
    let s = (acc.x + acc.y + acc.z + acc.w) * params.scale;
    p[pBase + j] = s;
    m = max(m, s);
  }
  var sum = 0.0;
  for (var j = 0u; j <= t; j++) {
    let e = exp(p[pBase + j] - m);
    p[pBase + j] = e;
    sum += e;
  }
  let inv = 1.0 / sum;
  for (var j = 0u; j <= t; j++) { p[pBase + j] *= inv; }
  for (var j = t + 1u; j < T; j++) { p[pBase + j] = 0.0; }
  for (var d = 0u; d < D4; d++) {
    var acc = vec4f(0.0);
    for (var j = 0u; j <= t; j++) { acc += p[pBase + j] * v[kvBase + j * D4 + d]; }
    o[qBase + d] = acc;
  }
}
