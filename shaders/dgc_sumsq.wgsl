// dgc_sumsq — partial sums for DGC's local gradient clipping (‖g‖²), with no readback and no barriers.
// Invocation t (t < T) sums f(x) over the vec4s t, t + T, t + 2T, … (a fixed order, so the result is
// deterministic) and writes y[t]; f(x) = x·x when SQUARE, else x. Lanes past the n scalars of the last
// vec4 count as 0 (bindings are rounded up to 16 bytes; the tail is scratch).
// Two dispatches make ‖g‖²: SQUARE over g into T partials, then SQUARE = false over the partials with T = 1.
// Bindings: 0 uniform Params, 1 x: array<vec4f> (n scalars), 2 y: array<f32> [T]. Dispatch (ceil(T / WG)).
struct Params { n: u32, T: u32 }

override SQUARE: bool = true;
override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let t = gid.x;
  if (t >= p.T) { return; }
  let full = p.n / 4u;   // vec4s with all four lanes inside the vector
  var acc = vec4f(0.0);
  for (var i = t; i < full; i += p.T) {
    let v = x[i];
    if (SQUARE) { acc += v * v; } else { acc += v; }
  }
  // The partial last vec4 belongs to the invocation whose stride sequence reaches it.
  if (full * 4u < p.n && full % p.T == t) {
    let lane = vec4u(full * 4u) + vec4u(0u, 1u, 2u, 3u);
    let v = select(vec4f(0.0), x[full], lane < vec4u(p.n));
    if (SQUARE) { acc += v * v; } else { acc += v; }
  }
  y[t] = (acc.x + acc.y) + (acc.z + acc.w);
}
