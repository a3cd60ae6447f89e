// softmax — numerically stable softmax over the last dim, optionally causal.
// With causalT > 0, row r of each T×T block sees columns ≤ r mod T; masked entries output 0.
// x [rows, C] → y [rows, C]. Bindings: 0 uniform Params, 1 x, 2 y.
// One invocation per row; dispatch grid1d(rows, WG).
struct Params { rows: u32, rowStride: u32, C: u32, causalT: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let r = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || r >= p.rows) { return; }
  let base = r * p.C;
  var limit = p.C;
  if (p.causalT > 0u) { limit = min(r % p.causalT + 1u, p.C); }
  var m = -3.4028234663852886e38;
  for (var c = 0u; c < limit; c++) { m = max(m, x[base + c]); }
  var s = 0.0;
  for (var c = 0u; c < limit; c++) { s += exp(x[base + c] - m); }
  let inv = 1.0 / s;
  for (var c = 0u; c < limit; c++) { y[base + c] = exp(x[base + c] - m) * inv; }
  for (var c = limit; c < p.C; c++) { y[base + c] = 0.0; }
}
