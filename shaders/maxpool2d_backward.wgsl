// maxpool2d_backward — dx as a gather: each input element sums dy over the outputs whose argmax is
// that element, in increasing output order (deterministic, no atomics).
// dy [B·C, outH, outW], argmax i32 [B·C, outH, outW] → dx [B·C, inH, inW].
// Bindings: 0 uniform Params, 1 dy, 2 argmax, 3 dx. One invocation per input element;
// dispatch grid1d(n, WG).
struct Params {
  n: u32, rowStride: u32, inH: u32, inW: u32,
  k: u32, stride: u32, outH: u32, outW: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> argmax: array<i32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

// Outputs whose window [o·s, o·s + k) contains position v: o in [lo, hi).
fn windowRange(v: u32, outLen: u32) -> vec2u {
  var lo = 0u;
  if (v + 1u > p.k) { lo = (v + 1u - p.k + p.stride - 1u) / p.stride; }
  let hi = min(v / p.stride + 1u, outLen);
  return vec2u(lo, hi);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  let inHW = p.inH * p.inW;
  let bc = i / inHW;
  let pix = i % inHW;
  let rh = windowRange(pix / p.inW, p.outH);
  let rw = windowRange(pix % p.inW, p.outW);
  var acc = 0.0;
  for (var oh = rh.x; oh < rh.y; oh++) {
    let row = (bc * p.outH + oh) * p.outW;
    for (var ow = rw.x; ow < rw.y; ow++) {
      if (argmax[row + ow] == i32(i)) { acc += dy[row + ow]; }
    }
  }
  dx[i] = acc;
}
