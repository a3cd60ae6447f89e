// binary — out[i] = f(a[ia], b[ib]) with broadcasting over up to 4 dims (strides 0 on broadcast dims).
// OP: 0 add, 1 sub, 2 mul, 3 div, 4 reluGrad (a·[b > 0]), 5 geluGrad (a·gelu'(b)), 6 tanhGrad (a·(1 − b²)).
// Bindings: 0 uniform Params, 1 a, 2 b, 3 out [n]. Dispatch (ceil(n / (WG·rows)), rows), i = y·rowStride + x.
struct Params {
  n: u32, rowStride: u32, pad0: u32, pad1: u32,
  shape: vec4u,    // out shape, right-aligned, leading 1s
  aStrides: vec4u,
  bStrides: vec4u,
}

override OP: u32 = 0u;
// Same shapes, no broadcasting: skip the index arithmetic (integer division is scalarized, and slow,
// on CPU adapters).
override CONTIGUOUS: bool = false;
override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn geluDerivative(v: f32) -> f32 {
  let k = 0.7978845608028654;
  let u = k * (v + 0.044715 * v * v * v);
  let t = tanh(clamp(u, -15.0, 15.0));
  return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * v * v);
}

fn apply(x: f32, y: f32) -> f32 {
  switch (OP) {
    case 0u: { return x + y; }
    case 1u: { return x - y; }
    case 2u: { return x * y; }
    case 3u: { return x / y; }
    case 4u: { return select(0.0, x, y > 0.0); }
    case 5u: { return x * geluDerivative(y); }
    default: { return x * (1.0 - y * y); }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  if (CONTIGUOUS) {
    out[i] = apply(a[i], b[i]);
    return;
  }
  let s = p.shape;
  let i3 = i % s.w;
  let i2 = (i / s.w) % s.z;
  let i1 = (i / (s.w * s.z)) % s.y;
  let i0 = i / (s.w * s.z * s.y);
  let idx = vec4u(i0, i1, i2, i3);
  out[i] = apply(a[dot(idx, p.aStrides)], b[dot(idx, p.bStrides)]);
}
