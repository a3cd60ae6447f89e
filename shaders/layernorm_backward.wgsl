// layernorm_backward — gradients of layernorm, rows and columns in one dispatch.
// Invocations [0, rows): dx per row, dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·gamma,
//   x̂ = (x − mean)·rstd.
// Invocations [rows, rows + C): column c = i − rows loops over rows:
//   dgamma[c] = Σ_r dy[r, c]·x̂[r, c], dbeta[c] = Σ_r dy[r, c] (deterministic, no atomics).
// dy, x [rows, C], gamma [C], mean, rstd [rows] → dx [rows, C], dgamma [C], dbeta [C].
// Bindings: 0 uniform Params, 1 dy, 2 x, 3 gamma, 4 mean, 5 rstd, 6 dx, 7 dgamma, 8 dbeta.
// Dispatch grid1d(rows + C, WG).
struct Params { rows: u32, rowStride: u32, C: u32, pad0: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> gamma: array<f32>;
@group(0) @binding(4) var<storage, read> mean: array<f32>;
@group(0) @binding(5) var<storage, read> rstd: array<f32>;
@group(0) @binding(6) var<storage, read_write> dx: array<f32>;
@group(0) @binding(7) var<storage, read_write> dgamma: array<f32>;
@group(0) @binding(8) var<storage, read_write> dbeta: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.rows + p.C) { return; }
  if (i < p.rows) {
    let base = i * p.C;
    let mu = mean[i];
    let rs = rstd[i];
    var sumG = 0.0;
    var sumGX = 0.0;
    for (var c = 0u; c < p.C; c++) {
      let g = dy[base + c] * gamma[c];
      sumG += g;
      sumGX = fma(g, (x[base + c] - mu) * rs, sumGX);
    }
    let n = f32(p.C);
    let a = sumG / n;
    let bq = sumGX / n;
    for (var c = 0u; c < p.C; c++) {
      let xhat = (x[base + c] - mu) * rs;
      dx[base + c] = rs * (dy[base + c] * gamma[c] - a - xhat * bq);
    }
  } else {
    let c = i - p.rows;
    var dg = 0.0;
    var db = 0.0;
    for (var r = 0u; r < p.rows; r++) {
      let g = dy[r * p.C + c];
      dg = fma(g, (x[r * p.C + c] - mean[r]) * rstd[r], dg);
      db += g;
    }
    dgamma[c] = dg;
    dbeta[c] = db;
  }
}
