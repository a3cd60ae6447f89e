// layernorm — row layer norm over the last dim: y = (x − mean)·rstd·gamma + beta, rstd = 1/√(var + eps).
// Statistics are taken about the row's first element (x − x₀ is exact for nearby values), so rows with
// a large common offset such as 1e4 + noise keep their precision in f32.
// x [rows, C], gamma [C], beta [C] → y [rows, C], mean [rows], rstd [rows].
// Bindings: 0 uniform Params, 1 x, 2 gamma, 3 beta, 4 y, 5 mean, 6 rstd.
// One invocation per row; dispatch grid1d(rows, WG).
struct Params { rows: u32, rowStride: u32, C: u32, eps: f32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let r = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || r >= p.rows) { return; }
  let base = r * p.C;
  let x0 = x[base];
  let n = f32(p.C);
  var s = 0.0;
  for (var c = 0u; c < p.C; c++) { s += x[base + c] - x0; }
  let shift = s / n;
  var v = 0.0;
  for (var c = 0u; c < p.C; c++) {
    let d = (x[base + c] - x0) - shift;
    v = fma(d, d, v);
  }
  let rs = 1.0 / sqrt(v / n + p.eps);
  for (var c = 0u; c < p.C; c++) {
    y[base + c] = ((x[base + c] - x0) - shift) * rs * gamma[c] + beta[c];
  }
  mean[r] = x0 + shift;
  rstd[r] = rs;
}
