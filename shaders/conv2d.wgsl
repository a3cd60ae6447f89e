// conv2d — forward 2-D convolution (NCHW) as an implicit GEMM, register-tiled, no workgroup memory.
// y[b, co, oh, ow] = bias[co] + Σ_{ci, kh, kw} x[b, ci, oh·s − pad + kh, ow·s − pad + kw] · w[co, ci, kh, kw]
// GEMM view: M = B·outH·outW output pixels, N = outC, K = inC·kH·kW; taps outside the input read 0.
// x [B, inC, inH, inW], w [outC, inC, kH, kW], bias [outC] (any 1-element buffer when HAS_BIAS is
// false), y [B, outC, outH, outW].
// Bindings: 0 uniform Params, 1 x, 2 w, 3 bias, 4 y.
// Each invocation computes 4 consecutive pixels × 4 channels; invocation i = y·rowStride + x handles
// channel group i % chanGroups of pixel group i / chanGroups. Dispatch grid1d(pixelGroups·chanGroups, WG).
struct Params {
  batch: u32, inC: u32, inH: u32, inW: u32,
  outC: u32, kH: u32, kW: u32, stride: u32,
  pad: u32, outH: u32, outW: u32, rowStride: u32,
  M: u32, chanGroups: u32, total: u32, pad0: u32,
}

override WG: u32 = 64u;
override HAS_BIAS: bool = false;
// FLAT: one flat loop over K (fastest for few input channels); else taps outer, channels inner.
override FLAT: bool = false;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.total) { return; }
  let lane = vec4u(0u, 1u, 2u, 3u);
  let m0 = (i / p.chanGroups) * 4u;
  let co0 = (i % p.chanGroups) * 4u;
  // Clamped pixels and channels keep every load in bounds; their results are never stored.
  let m = min(vec4u(m0) + lane, vec4u(p.M - 1u));
  let co = min(vec4u(co0) + lane, vec4u(p.outC - 1u));
  let HW = p.outH * p.outW;
  let inHW = p.inH * p.inW;
  let b = m / HW;
  let pix = m % HW;
  let ih0 = vec4i((pix / p.outW) * p.stride) - vec4i(i32(p.pad));
  let iw0 = vec4i((pix % p.outW) * p.stride) - vec4i(i32(p.pad));
  let inH = vec4i(i32(p.inH));
  let inW = vec4i(i32(p.inW));
  // Flat index of tap (ci = 0, kh = 0, kw = 0) per pixel; negative when it lies in the padding.
  let xBase = vec4i(b * p.inC * inHW) + ih0 * inW + iw0;
  let K = p.inC * p.kH * p.kW;
  let wBase = co * K;
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  let kHW = p.kH * p.kW;
  if (FLAT) {
    // One flat loop over K in (kh, kw, ci) order, ci fastest, re-testing the tap's bounds only when ci
    // wraps: for few input channels this avoids entering a short inner loop per tap (costly on SwiftShader).
    var kh = 0u;
    var kw = 0u;
    var ci = 0u;
    var ok = vec4<bool>(false);
    var xi = vec4u(0u);
    var wi = vec4u(0u);
    for (var k = 0u; k < K; k++) {
      if (ci == 0u) {
        let ih = ih0 + vec4i(i32(kh));
        let iw = iw0 + vec4i(i32(kw));
        ok = (ih >= vec4i(0)) & (ih < inH) & (iw >= vec4i(0)) & (iw < inW);
        // Taps in the padding read element 0 and are then replaced by 0.
        xi = select(vec4u(0u), vec4u(xBase + vec4i(i32(kh * p.inW + kw))), ok);
        wi = wBase + vec4u(kh * p.kW + kw);
      }
      let xv = select(vec4f(0.0), vec4f(x[xi.x], x[xi.y], x[xi.z], x[xi.w]), ok);
      let wv = vec4f(w[wi.x], w[wi.y], w[wi.z], w[wi.w]);
      acc0 = fma(vec4f(xv.x), wv, acc0);
      acc1 = fma(vec4f(xv.y), wv, acc1);
      acc2 = fma(vec4f(xv.z), wv, acc2);
      acc3 = fma(vec4f(xv.w), wv, acc3);
      xi += vec4u(inHW);
      wi += vec4u(kHW);
      ci++;
      if (ci == p.inC) {
        ci = 0u;
        kw++;
        if (kw == p.kW) { kw = 0u; kh++; }
      }
    }
  } else {
    // Taps outer, bounds tested once per tap; the ci loop inside is a plain strided GEMM.
    for (var kh = 0u; kh < p.kH; kh++) {
      let ih = ih0 + vec4i(i32(kh));
      let rowOk = (ih >= vec4i(0)) & (ih < inH);
      for (var kw = 0u; kw < p.kW; kw++) {
        let iw = iw0 + vec4i(i32(kw));
        let ok = rowOk & (iw >= vec4i(0)) & (iw < inW);
        // Taps in the padding read element 0 and are then replaced by 0.
        var xi = select(vec4u(0u), vec4u(xBase + vec4i(i32(kh * p.inW + kw))), ok);
        var wi = wBase + vec4u(kh * p.kW + kw);
        for (var ci = 0u; ci < p.inC; ci++) {
          let xv = select(vec4f(0.0), vec4f(x[xi.x], x[xi.y], x[xi.z], x[xi.w]), ok);
          let wv = vec4f(w[wi.x], w[wi.y], w[wi.z], w[wi.w]);
          acc0 = fma(vec4f(xv.x), wv, acc0);
          acc1 = fma(vec4f(xv.y), wv, acc1);
          acc2 = fma(vec4f(xv.z), wv, acc2);
          acc3 = fma(vec4f(xv.w), wv, acc3);
          xi += vec4u(inHW);
          wi += vec4u(kHW);
        }
      }
    }
  }
  var bv = vec4f(0.0);
  if (HAS_BIAS) { bv = vec4f(bias[co.x], bias[co.y], bias[co.z], bias[co.w]); }
  let accs = array<vec4f, 4>(acc0 + bv, acc1 + bv, acc2 + bv, acc3 + bv);
  for (var j = 0u; j < 4u; j++) {
    if (m0 + j >= p.M) { break; }
    let outBase = b[j] * p.outC * HW + pix[j];
    let v = accs[j];
    for (var c = 0u; c < 4u; c++) {
      if (co0 + c < p.outC) { y[outBase + (co0 + c) * HW] = v[c]; }
    }
  }
}
