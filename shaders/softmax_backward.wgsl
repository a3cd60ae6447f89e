// softmax_backward — dx = y·(dy − Σ_c dy·y) per row (masked entries have y = 0, so dx = 0 there).
// y, dy [rows, C] → dx [rows, C]. Bindings: 0 uniform Params, 1 y, 2 dy, 3 dx.
// One invocation per row; dispatch grid1d(rows, WG).
struct Params { rows: u32, rowStride: u32, C: u32, pad0: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let r = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || r >= p.rows) { return; }
  let base = r * p.C;
  var dot = 0.0;
  for (var c = 0u; c < p.C; c++) { dot = fma(dy[base + c], y[base + c], dot); }
  for (var c = 0u; c < p.C; c++) { dx[base + c] = y[base + c] * (dy[base + c] - dot); }
}
