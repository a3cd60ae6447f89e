// maxpool2d_backward_tiles — dx of max pooling when windows do not overlap (stride ≥ k), the usual
// k = stride case. Output (oh, ow) owns the input tile rows [oh·s, (oh + 1)·s) × cols [ow·s, (ow + 1)·s)
// (the last row/column of outputs also owns the remainder up to inH/inW), which holds its whole window,
// so every dx element is written by exactly one invocation: dy[o] at argmax[o], 0 elsewhere.
// Deterministic, no atomics, and one invocation per output instead of per input element.
// dy [B·C, outH, outW], argmax i32 [B·C, outH, outW] → dx [B·C, inH, inW].
// Bindings: 0 uniform Params, 1 dy, 2 argmax, 3 dx. One invocation per output; dispatch grid1d(n, WG).
struct Params {
  n: u32, rowStride: u32, inH: u32, inW: u32,
  k: u32, stride: u32, outH: u32, outW: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> argmax: array<i32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let o = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || o >= p.n) { return; }
  let outHW = p.outH * p.outW;
  let bc = o / outHW;
  let pix = o % outHW;
  let oh = pix / p.outW;
  let ow = pix % p.outW;
  let h0 = min(oh * p.stride, p.inH);
  let w0 = min(ow * p.stride, p.inW);
  let h1 = select(min(h0 + p.stride, p.inH), p.inH, oh + 1u == p.outH);
  let w1 = select(min(w0 + p.stride, p.inW), p.inW, ow + 1u == p.outW);
  let a = argmax[o];
  let g = dy[o];
  for (var ih = h0; ih < h1; ih++) {
    let row = (bc * p.inH + ih) * p.inW;
    for (var iw = w0; iw < w1; iw++) {
      dx[row + iw] = select(0.0, g, i32(row + iw) == a);
    }
  }
}
