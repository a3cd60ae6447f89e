// softmax_ce — fused, numerically stable softmax cross-entropy, one invocation per row.
// logits [B, C], labels i32 [B] → loss [B] (logsumexp − logit_label), probs [B, C].
// Bindings: 0 uniform Params, 1 logits, 2 labels, 3 loss, 4 probs. Dispatch (ceil(B / WG)).
struct Params { B: u32, C: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read_write> loss: array<f32>;
@group(0) @binding(4) var<storage, read_write> probs: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let b = gid.x;
  if (b >= p.B) { return; }
  let base = b * p.C;
  var m = -3.4028234663852886e38;
  for (var c = 0u; c < p.C; c++) { m = max(m, logits[base + c]); }
  var s = 0.0;
  for (var c = 0u; c < p.C; c++) { s += exp(logits[base + c] - m); }
  let logSum = log(s);
  for (var c = 0u; c < p.C; c++) { probs[base + c] = exp(logits[base + c] - m - logSum); }
  let y = u32(clamp(labels[b], 0, i32(p.C) - 1));
  loss[b] = logSum - (logits[base + y] - m);
}
