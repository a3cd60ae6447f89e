// dgc_accumulate — DGC momentum correction and local accumulation, in place over flat vectors of n
// scalars, with the previous selection's momentum factor masking and local gradient clipping fused in:
//   masked_i = MASK ∧ (|v_i| > maskThr ∨ (|v_i| = maskThr ∧ i ≤ maskTieIndex))   (what was last sent)
//   v_i, u_i ← 0 where masked_i
//   g ← g · min(1, clipNorm / sqrt(sumSq[0]))  if CLIP
//   u ← momentum·u + g; v ← v + u             if MOMENTUM, else v ← v + g (u untouched)
// Works on vec4s; lanes at or past n (scratch in the last vec4) see g = 0 and are never masked.
// Bindings: 0 uniform Params, 1 g [n], 2 u [n] (unused unless MOMENTUM), 3 v [n], 4 sumSq [1] (unused
// unless CLIP). Dispatch (ceil(ceil(n/4) / (WG·rows)), rows), vec4 index = y·rowStride + x.
struct Params { n: u32, rowStride: u32, momentum: f32, clipNorm: f32, maskThr: f32, maskTieIndex: u32 }

override MOMENTUM: bool = true;
override CLIP: bool = false;
override MASK: bool = false;
override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> g: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> u: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> v: array<vec4f>;
@group(0) @binding(4) var<storage, read> sumSq: array<f32>;

fn clipScale() -> f32 {
  if (!CLIP) { return 1.0; }
  let norm = sqrt(sumSq[0]);
  // NaN norms compare false and leave g unscaled (the inbound checks reject non-finite updates).
  return select(1.0, p.clipNorm / norm, norm > p.clipNorm);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i * 4u >= p.n) { return; }
  let lane = vec4u(i * 4u) + vec4u(0u, 1u, 2u, 3u);
  let live = lane < vec4u(p.n);
  let gv = select(vec4f(0.0), g[i] * clipScale(), live);
  let v0 = v[i];
  let a = abs(v0);
  let thr = vec4f(p.maskThr);
  let sent = live & vec4<bool>(MASK) & ((a > thr) | ((a == thr) & (lane <= vec4u(p.maskTieIndex))));
  let vm = select(v0, vec4f(0.0), sent);
  if (MOMENTUM) {
    let un = p.momentum * select(u[i], vec4f(0.0), sent) + gv;
    u[i] = un;
    v[i] = vm + un;
  } else {
    v[i] = vm + gv;
  }
}
