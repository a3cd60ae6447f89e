// conv2d_backward_filter — dw = ∂L/∂w of conv2d (NCHW) as a split-K implicit GEMM, register-tiled.
// dw[co, ci, kh, kw] = Σ_{b, oh, ow} dy[b, co, oh, ow] · x[b, ci, oh·s − pad + kh, ow·s − pad + kw]
// GEMM view: M = outC, N = inC·kH·kW, K = B·outH·outW. K is large and M·N small, so K is cut into
// `splits` chunks of kChunk; split z writes its partial sums to part[z, co, n] and a second pass
// (reduce: sum over the split axis) adds them up. With splits = 1, part is dw itself.
// dy [B, outC, outH, outW], x [B, inC, inH, inW], part [splits, outC, inC·kH·kW].
// Bindings: 0 uniform Params, 1 dy, 2 x, 3 part.
// Each invocation computes a 4 (co) × 4 (n) block over one chunk; invocation i = y·rowStride + x handles
// tile i % tiles of split i / tiles, tiles = ceil(M/4)·nGroups. Dispatch grid1d(tiles·splits, WG).
struct Params {
  batch: u32, inC: u32, inH: u32, inW: u32,
  outC: u32, kH: u32, kW: u32, stride: u32,
  pad: u32, outH: u32, outW: u32, rowStride: u32,
  nGroups: u32, tiles: u32, total: u32, kChunk: u32,
}

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.total) { return; }
  let lane = vec4u(0u, 1u, 2u, 3u);
  let split = i / p.tiles;
  let tile = i % p.tiles;
  let co0 = (tile / p.nGroups) * 4u;
  let n0 = (tile % p.nGroups) * 4u;
  let kHW = p.kH * p.kW;
  let N = p.inC * kHW;
  let co = min(vec4u(co0) + lane, vec4u(p.outC - 1u));
  let n = min(vec4u(n0) + lane, vec4u(N - 1u));
  let ci = n / kHW;
  let r = n % kHW;
  let offH = vec4i(r / p.kW) - vec4i(i32(p.pad));
  let offW = vec4i(r % p.kW) - vec4i(i32(p.pad));
  let inHW = p.inH * p.inW;
  let outHW = p.outH * p.outW;
  let inH = vec4i(i32(p.inH));
  let inW = vec4i(i32(p.inW));
  let xc = vec4i(ci * inHW) + offH * inW + offW;
  let dyc = co * outHW;
  let K = p.batch * outHW;
  let k0 = split * p.kChunk;
  let k1 = min(K, k0 + p.kChunk);
  // (b, oh, ow) of k, advanced incrementally.
  var b = k0 / outHW;
  var oh = (k0 % outHW) / p.outW;
  var ow = k0 % p.outW;
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  for (var k = k0; k < k1; k++) {
    let dIdx = dyc + vec4u(b * p.outC * outHW + oh * p.outW + ow);
    let dv = vec4f(dy[dIdx.x], dy[dIdx.y], dy[dIdx.z], dy[dIdx.w]);
    let ih = vec4i(i32(oh * p.stride)) + offH;
    let iw = vec4i(i32(ow * p.stride)) + offW;
    let ok = (ih >= vec4i(0)) & (ih < inH) & (iw >= vec4i(0)) & (iw < inW);
    let idx = select(vec4u(0u), vec4u(xc + vec4i(i32(b * p.inC * inHW + oh * p.stride * p.inW + ow * p.stride))), ok);
    let xv = select(vec4f(0.0), vec4f(x[idx.x], x[idx.y], x[idx.z], x[idx.w]), ok);
    acc0 = fma(vec4f(dv.x), xv, acc0);
    acc1 = fma(vec4f(dv.y), xv, acc1);
    acc2 = fma(vec4f(dv.z), xv, acc2);
    acc3 = fma(vec4f(dv.w), xv, acc3);
    ow++;
    if (ow == p.outW) {
      ow = 0u;
      oh++;
      if (oh == p.outH) { oh = 0u; b++; }
    }
  }
  let accs = array<vec4f, 4>(acc0, acc1, acc2, acc3);
  let base = split * p.outC * N;
  for (var j = 0u; j < 4u; j++) {
    if (co0 + j >= p.outC) { break; }
    let v = accs[j];
    for (var c = 0u; c < 4u; c++) {
      if (n0 + c < N) { part[base + (co0 + j) * N + n0 + c] = v[c]; }
    }
  }
}
