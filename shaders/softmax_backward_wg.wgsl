// softmax_backward_wg — the workgroup-per-row variant of softmax_backward: dx = y·(dy − Σ_c dy·y),
// the row's sum reduced in workgroup memory. y, dy [rows, C] → dx [rows, C].
// Bindings: 0 uniform Params, 1 y, 2 dy, 3 dx. Dispatch (min(rows, 65535), ⌈rows / 65535⌉).
struct Params { rows: u32, rowGroups: u32, C: u32, pad0: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.y * p.rowGroups + wid.x;
  if (r >= p.rows) { return; }
  let base = r * p.C;
  var s = 0.0;
  for (var c = lid; c < p.C; c += WG) { s += dy[base + c] * y[base + c]; }
  red[lid] = s;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h /= 2u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  let dot = red[0];
  for (var c = lid; c < p.C; c += WG) { dx[base + c] = y[base + c] * (dy[base + c] - dot); }
}
