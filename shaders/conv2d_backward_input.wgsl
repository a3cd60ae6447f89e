// conv2d_backward_input — dx = ∂L/∂x of conv2d (NCHW) as an implicit GEMM over dy and w, register-tiled.
// dx[b, ci, ih, iw] = Σ_{co, kh, kw} dy[b, co, oh, ow] · w[co, ci, kh, kw] over the (kh, kw) for which
// oh = (ih + pad − kh) / s and ow = (iw + pad − kw) / s are whole and inside the output.
// GEMM view: M = B·inH·inW input pixels, N = inC, K = outC·kH·kW.
// dy [B, outC, outH, outW], w [outC, inC, kH, kW], dx [B, inC, inH, inW].
// Bindings: 0 uniform Params, 1 dy, 2 w, 3 dx.
// Each invocation computes 4 consecutive input pixels × 4 input channels; invocation i = y·rowStride + x
// handles channel group i % chanGroups of pixel group i / chanGroups. Dispatch grid1d(pixelGroups·chanGroups, WG).
struct Params {
  batch: u32, inC: u32, inH: u32, inW: u32,
  outC: u32, kH: u32, kW: u32, stride: u32,
  pad: u32, outH: u32, outW: u32, rowStride: u32,
  M: u32, chanGroups: u32, total: u32, pad0: u32,
}

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.total) { return; }
  let lane = vec4u(0u, 1u, 2u, 3u);
  let m0 = (i / p.chanGroups) * 4u;
  let ci0 = (i % p.chanGroups) * 4u;
  let m = min(vec4u(m0) + lane, vec4u(p.M - 1u));
  let ci = min(vec4u(ci0) + lane, vec4u(p.inC - 1u));
  let inHW = p.inH * p.inW;
  let outHW = p.outH * p.outW;
  let kHW = p.kH * p.kW;
  let b = m / inHW;
  let pix = m % inHW;
  let th0 = vec4i(pix / p.inW) + vec4i(i32(p.pad));
  let tw0 = vec4i(pix % p.inW) + vec4i(i32(p.pad));
  let dyBatch = b * p.outC * outHW;
  let wCoStride = p.inC * kHW;
  let s = vec4u(p.stride);
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  for (var kh = 0u; kh < p.kH; kh++) {
    let th = th0 - vec4i(i32(kh));
    let thu = vec4u(max(th, vec4i(0)));
    let oh = thu / s;
    let rowOk = (th >= vec4i(0)) & (thu % s == vec4u(0u)) & (oh < vec4u(p.outH));
    if (!any(rowOk)) { continue; }
    for (var kw = 0u; kw < p.kW; kw++) {
      let tw = tw0 - vec4i(i32(kw));
      let twu = vec4u(max(tw, vec4i(0)));
      let ow = twu / s;
      let ok = rowOk & (tw >= vec4i(0)) & (twu % s == vec4u(0u)) & (ow < vec4u(p.outW));
      if (!any(ok)) { continue; }
      var d = select(vec4u(0u), dyBatch + oh * p.outW + ow, ok);
      var wi = ci * kHW + vec4u(kh * p.kW + kw);
      for (var co = 0u; co < p.outC; co++) {
        let dv = select(vec4f(0.0), vec4f(dy[d.x], dy[d.y], dy[d.z], dy[d.w]), ok);
        let wv = vec4f(w[wi.x], w[wi.y], w[wi.z], w[wi.w]);
        acc0 = fma(vec4f(dv.x), wv, acc0);
        acc1 = fma(vec4f(dv.y), wv, acc1);
        acc2 = fma(vec4f(dv.z), wv, acc2);
        acc3 = fma(vec4f(dv.w), wv, acc3);
        d += vec4u(outHW);
        wi += vec4u(wCoStride);
      }
    }
  }
  let accs = array<vec4f, 4>(acc0, acc1, acc2, acc3);
  for (var j = 0u; j < 4u; j++) {
    if (m0 + j >= p.M) { break; }
    let outBase = b[j] * p.inC * inHW + pix[j];
    let v = accs[j];
    for (var c = 0u; c < 4u; c++) {
      if (ci0 + c < p.inC) { dx[outBase + (ci0 + c) * inHW] = v[c]; }
    }
  }
}
