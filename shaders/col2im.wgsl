// col2im — folds column gradients back onto the conv2d input (the adjoint of im2col):
// dx[b, ci, ih, iw] = Σ over (kh, kw) with ih = oh·stride − pad + kh, iw likewise, of
// dcols[b, (ci, kh, kw), (oh, ow)]. Deterministic gather, no atomics.
// Bindings: 0 uniform Params, 1 dcols [B, K, P], 2 dx [B, inC, inH, inW]. One invocation per input
// row (b, ci, ih) writing inW values, so integer division is paid per row, not per element.
// Dispatch (ceil(rows / (WG·gy)), gy) with rows = B·inC·inH, row = y·rowStride + x.
struct Params {
  batch: u32, inC: u32, inH: u32, inW: u32,
  kH: u32, kW: u32, stride: u32, pad: u32,
  outH: u32, outW: u32, rowStride: u32, rows: u32,
}

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dcols: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let r = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || r >= p.rows) { return; }
  let ih = r % p.inH;
  let bc = r / p.inH;
  let ci = bc % p.inC;
  let b = bc / p.inC;
  let P = p.outH * p.outW;
  let K = p.inC * p.kH * p.kW;
  let s = i32(p.stride);
  for (var iw = 0u; iw < p.inW; iw++) {
    var acc = 0.0;
    for (var kh = 0u; kh < p.kH; kh++) {
      let th = i32(ih + p.pad) - i32(kh);
      if (th < 0 || th % s != 0 || u32(th / s) >= p.outH) { continue; }
      let rowBase = (b * K + (ci * p.kH + kh) * p.kW) * P + u32(th / s) * p.outW;
      for (var kw = 0u; kw < p.kW; kw++) {
        let tw = i32(iw + p.pad) - i32(kw);
        if (tw < 0 || tw % s != 0 || u32(tw / s) >= p.outW) { continue; }
        acc += dcols[rowBase + kw * P + u32(tw / s)];
      }
    }
    dx[r * p.inW + iw] = acc;
  }
}
