// matmul_reg — register-tiled matrix product with no workgroup memory and no barriers (the fast
// variant on CPU adapters such as SwiftShader, where barriers become coroutine switches).
// C[z] = act(op(A[z]) · op(B[z]) + bias); op(A): [M, K], op(B): [K, N], C: [batch, M, N].
// Bindings: 0 uniform Params, 1 A, 2 B, 3 bias [N] (any 1-element buffer when HAS_BIAS is false), 4 C.
// Each invocation computes a 4×4 block; dispatch (ceil(N/4/WG_X), ceil(M/4/WG_Y), batch).
struct Params { M: u32, N: u32, K: u32, strideA: u32, strideB: u32 }

override WG_X: u32 = 8;
override WG_Y: u32 = 8;
override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> C: array<f32>;

fn loadA(base: u32, r: u32, k: u32) -> f32 {
  if (TRANS_A) { return A[base + k * p.M + r]; }
  return A[base + r * p.K + k];
}

fn loadB(base: u32, k: u32, c: u32) -> f32 {
  if (TRANS_B) { return B[base + c * p.K + k]; }
  return B[base + k * p.N + c];
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let col0 = gid.x * 4u;
  let row0 = gid.y * 4u;
  if (row0 >= p.M || col0 >= p.N) { return; }
  let aBase = gid.z * p.strideA;
  let bBase = gid.z * p.strideB;
  // Clamped indices keep every load in bounds; results outside [M, N] are computed but never stored.
  let r = min(vec4u(row0) + vec4u(0u, 1u, 2u, 3u), vec4u(p.M - 1u));
  let c = min(vec4u(col0) + vec4u(0u, 1u, 2u, 3u), vec4u(p.N - 1u));
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  for (var k = 0u; k < p.K; k++) {
    let b = vec4f(loadB(bBase, k, c.x), loadB(bBase, k, c.y), loadB(bBase, k, c.z), loadB(bBase, k, c.w));
    acc0 = fma(vec4f(loadA(aBase, r.x, k)), b, acc0);
    acc1 = fma(vec4f(loadA(aBase, r.y, k)), b, acc1);
    acc2 = fma(vec4f(loadA(aBase, r.z, k)), b, acc2);
    acc3 = fma(vec4f(loadA(aBase, r.w, k)), b, acc3);
  }
  var bv = vec4f(0.0);
  if (HAS_BIAS) { bv = vec4f(bias[c.x], bias[c.y], bias[c.z], bias[c.w]); }
  let cBase = gid.z * p.M * p.N;
  let rows = array<vec4f, 4>(acc0 + bv, acc1 + bv, acc2 + bv, acc3 + bv);
  for (var i = 0u; i < 4u; i++) {
    let row = row0 + i;
    if (row >= p.M) { break; }
    var v = rows[i];
    if (RELU) { v = max(v, vec4f(0.0)); }
    for (var j = 0u; j < 4u; j++) {
      if (col0 + j < p.N) { C[cBase + row * p.N + col0 + j] = v[j]; }
    }
  }
}
