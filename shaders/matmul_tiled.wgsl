// matmul_tiled — shared-memory tiled matrix product (the fast variant on real GPUs).
// C[z] = act(op(A[z]) · op(B[z]) + bias); op(A): [M, K], op(B): [K, N], C: [batch, M, N].
// Bindings: 0 uniform Params, 1 A, 2 B, 3 bias [N] (any 1-element buffer when HAS_BIAS is false), 4 C.
// A 16×16 workgroup computes a 64×64 tile, 4×4 per invocation, stepping K by 16.
// Dispatch (ceil(N/64), ceil(M/64), batch).
struct Params { M: u32, N: u32, K: u32, strideA: u32, strideB: u32 }

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

const TILE: u32 = 64u;
const TK: u32 = 16u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> C: array<f32>;

var<workgroup> tileA: array<f32, 1024>; // [TK][TILE]: tileA[k * TILE + m]
var<workgroup> tileB: array<f32, 1024>; // [TK][TILE]: tileB[k * TILE + n]

fn loadA(base: u32, r: u32, k: u32) -> f32 {
  if (r >= p.M || k >= p.K) { return 0.0; }
  if (TRANS_A) { return A[base + k * p.M + r]; }
  return A[base + r * p.K + k];
}

fn loadB(base: u32, k: u32, c: u32) -> f32 {
  if (k >= p.K || c >= p.N) { return 0.0; }
  if (TRANS_B) { return B[base + c * p.K + k]; }
  return B[base + k * p.N + c];
}

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let tileRow = wid.y * TILE;
  let tileCol = wid.x * TILE;
  let aBase = wid.z * p.strideA;
  let bBase = wid.z * p.strideB;
  let flat = lid.y * 16u + lid.x; // 0..255
  var acc: array<vec4f, 4>;
  for (var k0 = 0u; k0 < p.K; k0 += TK) {
    // 256 invocations load 1024 values of each tile: 4 each.
    for (var i = 0u; i < 4u; i++) {
      let e = flat + i * 256u;
      let kk = e / TILE;
      let mn = e % TILE;
      tileA[kk * TILE + mn] = loadA(aBase, tileRow + mn, k0 + kk);
      tileB[kk * TILE + mn] = loadB(bBase, k0 + kk, tileCol + mn);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TK; kk++) {
      let b = vec4f(tileB[kk * TILE + lid.x * 4u], tileB[kk * TILE + lid.x * 4u + 1u], tileB[kk * TILE + lid.x * 4u + 2u], tileB[kk * TILE + lid.x * 4u + 3u]);
      for (var i = 0u; i < 4u; i++) {
        acc[i] = fma(vec4f(tileA[kk * TILE + lid.y * 4u + i]), b, acc[i]);
      }
    }
    workgroupBarrier();
  }
  let cBase = wid.z * p.M * p.N;
  for (var i = 0u; i < 4u; i++) {
    let row = tileRow + lid.y * 4u + i;
    if (row >= p.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let col = tileCol + lid.x * 4u + j;
      if (col >= p.N) { break; }
      var v = acc[i][j];
      if (HAS_BIAS) { v += bias[col]; }
      if (RELU) { v = max(v, 0.0); }
      C[cBase + row * p.N + col] = v;
    }
  }
}
