// layernorm_wg — the layernorm kernel's workgroup-per-row variant: y = (x − mean)·rstd·gamma + beta,
// statistics about the row's first element as in layernorm.wgsl, the row sums reduced in workgroup
// memory. x [rows, C], gamma [C], beta [C] → y [rows, C], mean [rows], rstd [rows].
// Bindings: 0 uniform Params, 1 x, 2 gamma, 3 beta, 4 y, 5 mean, 6 rstd. Dispatch (min(rows, 65535), ⌈rows / 65535⌉).
struct Params { rows: u32, rowGroups: u32, C: u32, eps: f32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;

var<workgroup> red: array<f32, WG>;

fn rowSum(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h /= 2u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.y * p.rowGroups + wid.x;
  if (r >= p.rows) { return; }
  let base = r * p.C;
  let x0 = x[base];
  let n = f32(p.C);
  var s = 0.0;
  for (var c = lid; c < p.C; c += WG) { s += x[base + c] - x0; }
  let shift = rowSum(lid, s) / n;
  var v = 0.0;
  for (var c = lid; c < p.C; c += WG) {
    let d = (x[base + c] - x0) - shift;
    v = fma(d, d, v);
  }
  let rs = 1.0 / sqrt(rowSum(lid, v) / n + p.eps);
  for (var c = lid; c < p.C; c += WG) {
    y[base + c] = ((x[base + c] - x0) - shift) * rs * gamma[c] + beta[c];
  }
  if (lid == 0u) {
    mean[r] = x0 + shift;
    rstd[r] = rs;
  }
}
