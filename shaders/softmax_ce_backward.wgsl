// softmax_ce_backward — gradient of the mean cross-entropy: dlogits = (probs − onehot) · dmean[0] / B.
// Bindings: 0 uniform Params, 1 probs [B, C], 2 labels i32 [B], 3 dmean [1], 4 dlogits [B, C].
// Dispatch grid1d(B·C, WG): invocation (x, y) handles element y·rowStride + x (past 65,535 workgroups
// in x, as a GPT's logits over GPT-2's vocabulary at context 1,024 are).
struct Params { B: u32, C: u32, rowStride: u32 }

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> probs: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read> dmean: array<f32>;
@group(0) @binding(4) var<storage, read_write> dlogits: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (i >= p.B * p.C) { return; }
  let b = i / p.C;
  let c = i % p.C;
  let onehot = select(0.0, 1.0, i32(c) == labels[b]);
  dlogits[i] = (probs[i] - onehot) * dmean[0] / f32(p.B);
}
