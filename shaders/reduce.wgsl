// reduce — x viewed as [outer, R, inner] → y [outer, inner]; one invocation per output.
// OP: 0 sum, 1 max, 2 mean. Bindings: 0 uniform Params, 1 x, 2 y. Dispatch grid1d(outer·inner, WG):
// invocation (x, y) handles output y·rowStride + x.
struct Params { outer: u32, R: u32, inner: u32, rowStride: u32 }

override OP: u32 = 0u;
override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let o = gid.y * p.rowStride + gid.x;
  if (o >= p.outer * p.inner) { return; }
  let outerIdx = o / p.inner;
  let j = o % p.inner;
  let base = outerIdx * p.R * p.inner + j;
  var acc = 0.0;
  if (OP == 1u) { acc = -3.4028234663852886e38; }
  for (var r = 0u; r < p.R; r++) {
    let v = x[base + r * p.inner];
    if (OP == 1u) { acc = max(acc, v); } else { acc += v; }
  }
  if (OP == 2u) { acc = acc / f32(p.R); }
  y[o] = acc;
}
