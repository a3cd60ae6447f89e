// im2col — unfolds conv2d input patches into columns so conv becomes a matmul:
// x [B, inC, inH, inW] → cols [B, K, P] with K = inC·kH·kW (row k = (ci, kh, kw)) and
// P = outH·outW (column p = (oh, ow)); taps in the padding are 0.
// Bindings: 0 uniform Params, 1 x, 2 cols. One invocation per output row segment (b, k, oh) writing
// outW values: integer division is scalarized on CPU adapters, so it is paid once per row, not per
// element. Dispatch (ceil(rows / (WG·gy)), gy) with rows = B·K·outH, row = y·rowStride + x.
struct Params {
  batch: u32, inC: u32, inH: u32, inW: u32,
  kH: u32, kW: u32, stride: u32, pad: u32,
  outH: u32, outW: u32, rowStride: u32, rows: u32,
}

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> cols: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let r = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || r >= p.rows) { return; }
  let oh = r % p.outH;
  let bk = r / p.outH;
  let K = p.inC * p.kH * p.kW;
  let k = bk % K;
  let b = bk / K;
  let kw = k % p.kW;
  let kh = (k / p.kW) % p.kH;
  let ci = k / (p.kW * p.kH);
  let ih = i32(oh * p.stride + kh) - i32(p.pad);
  let out = r * p.outW;
  if (ih < 0 || ih >= i32(p.inH)) {
    for (var ow = 0u; ow < p.outW; ow++) { cols[out + ow] = 0.0; }
    return;
  }
  let src = ((b * p.inC + ci) * p.inH + u32(ih)) * p.inW;
  var iw = i32(kw) - i32(p.pad);
  for (var ow = 0u; ow < p.outW; ow++) {
    let inside = iw >= 0 && iw < i32(p.inW);
    cols[out + ow] = select(0.0, x[src + u32(clamp(iw, 0, i32(p.inW) - 1))], inside);
    iw += i32(p.stride);
  }
}
