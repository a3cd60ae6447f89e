// softmax_wg — the softmax kernel's workgroup-per-row variant, for adapters with many lanes per row to
// spare (real GPUs): row r = workgroup (wid.x + wid.y·rowGroups); its WG invocations stride over the
// columns and reduce the row max and sum in workgroup memory (2·log2 WG barriers a row). Optionally
// causal: with causalT > 0, row r sees columns ≤ r mod causalT; masked entries output 0.
// x [rows, C] → y [rows, C]. Bindings: 0 uniform Params, 1 x, 2 y. Dispatch (min(rows, 65535), ⌈rows / 65535⌉).
struct Params { rows: u32, rowGroups: u32, C: u32, causalT: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wid.y * p.rowGroups + wid.x;
  // Uniform across the workgroup, so every invocation returns together (no barrier is skipped by some).
  if (r >= p.rows) { return; }
  let base = r * p.C;
  var limit = p.C;
  if (p.causalT > 0u) { limit = min(r % p.causalT + 1u, p.C); }
  var m = -3.4028234663852886e38;
  for (var c = lid; c < limit; c += WG) { m = max(m, x[base + c]); }
  red[lid] = m;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h /= 2u) {
    if (lid < h) { red[lid] = max(red[lid], red[lid + h]); }
    workgroupBarrier();
  }
  let rowMax = red[0];
  workgroupBarrier();
  var s = 0.0;
  for (var c = lid; c < limit; c += WG) { s += exp(x[base + c] - rowMax); }
  red[lid] = s;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h /= 2u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  let inv = 1.0 / red[0];
  for (var c = lid; c < limit; c += WG) { y[base + c] = exp(x[base + c] - rowMax) * inv; }
  for (var c = limit + lid; c < p.C; c += WG) { y[base + c] = 0.0; }
}
