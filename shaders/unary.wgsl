// unary — y[i] = f(x[i]) for the op chosen by the OP override.
// OP: 0 neg, 1 exp, 2 log, 3 sqrt, 4 relu, 5 gelu (tanh form), 6 tanh, 7 scale (x·alpha),
//     8 addScalar (x + alpha), 9 square, 10 copy.
// Works on vec4s (n = vec4 count): 16-byte loads cost CPU adapters far less than four scalar ones;
// bindings are rounded up to 16 bytes and the tail past the tensor is scratch.
// Bindings: 0 uniform Params, 1 x, 2 y. Dispatch (ceil(n / (WG·rows)), rows), i = y·rowStride + x.
struct Params { n: u32, rowStride: u32, alpha: f32 }

override OP: u32 = 0u;
override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4f>;

fn apply(v: vec4f) -> vec4f {
  switch (OP) {
    case 0u: { return -v; }
    case 1u: { return exp(v); }
    case 2u: { return log(v); }
    case 3u: { return sqrt(v); }
    case 4u: { return max(v, vec4f(0.0)); }
    case 5u: {
      let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
      return 0.5 * v * (1.0 + tanh(clamp(u, vec4f(-15.0), vec4f(15.0))));
    }
    case 6u: { return tanh(clamp(v, vec4f(-15.0), vec4f(15.0))); }
    case 7u: { return v * p.alpha; }
    case 8u: { return v + p.alpha; }
    case 9u: { return v * v; }
    default: { return v; }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  y[i] = apply(x[i]);
}
