// maxpool2d — max pooling (NCHW) with the flat input index of each maximum.
// y[bc, oh, ow] = max over the window rows oh·s .. oh·s + k − 1, cols ow·s .. ow·s + k − 1, clipped at
// the border; ties keep the first maximum in row-major window order (the CPU reference's rule).
// x [B·C, inH, inW] → y [B·C, outH, outW], argmax i32 [B·C, outH, outW] (flat index into x).
// Bindings: 0 uniform Params, 1 x, 2 y, 3 argmax. One invocation per output; dispatch grid1d(n, WG).
struct Params {
  n: u32, rowStride: u32, inH: u32, inW: u32,
  k: u32, stride: u32, outH: u32, outW: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> argmax: array<i32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let o = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || o >= p.n) { return; }
  let outHW = p.outH * p.outW;
  let bc = o / outHW;
  let pix = o % outHW;
  let h0 = (pix / p.outW) * p.stride;
  let w0 = (pix % p.outW) * p.stride;
  let h1 = min(h0 + p.k, p.inH);
  let w1 = min(w0 + p.k, p.inW);
  var best = 0.0;
  var bestIdx = -1;
  for (var ih = h0; ih < h1; ih++) {
    let row = (bc * p.inH + ih) * p.inW;
    for (var iw = w0; iw < w1; iw++) {
      let v = x[row + iw];
      if (bestIdx < 0 || v > best) {
        best = v;
        bestIdx = i32(row + iw);
      }
    }
  }
  y[o] = best;
  argmax[o] = bestIdx;
}
