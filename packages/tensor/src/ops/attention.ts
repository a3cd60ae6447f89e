// Causal scaled dot-product attention with gradients: composed from matmul, scale and causal
// softmax, or one fused forward kernel where the backend says it pays (`Backend.fusedAttention`).
// Both keep the probabilities for backward, which is the same matmuls and softmax backward.
import { derived, type Tensor } from '../tensor';
import { scale } from './elementwise';
import { softmax } from './loss';
import { matmul } from './matmul';

export interface AttentionOptions {
  /** Force the fused kernel (true) or the composed ops (false); default: the backend's choice. */
  fused?: boolean;
}

/** q, k, v [batch, T, D] → softmax(q·kᵀ / √D, causal) · v, [batch, T, D]. */
export function causalAttention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const [batch, T, D] = q.shape;
  for (const [name, t] of [['k', k], ['v', v]] as const) {
    if (t.shape.join() !== q.shape.join()) throw new Error(`causalAttention: ${name} is [${t.shape}], q [${q.shape}]`);
  }
  const s = 1 / Math.sqrt(D);
  const be = q.backend;
  if (!(opts.fused ?? be.fusedAttention) || D % 4 !== 0) return matmul(softmax(scale(matmul(q, k, { transB: true }), s), true), v);
  const { out, probs: probsStorage } = be.causalAttention(q.storage, k.storage, v.storage, batch, T, D, s);
  const probs = derived(be, probsStorage, [batch, T, T], [], 'attention_probs', () => []);
  return derived(be, out, [batch, T, D], [q, k, v], 'causal_attention', (dy) => {
    // d(scores) = scale · softmax'(probs)·(dy·vᵀ), shared by q's and k's gradients.
    let dScores: Tensor | null = null;
    const scoresGrad = () =>
      (dScores ??= scale(derived(be, be.softmaxBackward(probs.storage, matmul(dy, v, { transB: true }).storage, batch * T, T), [batch, T, T], [], 'softmax_grad', () => []), s));
    return [() => matmul(scoresGrad(), k), () => matmul(scoresGrad(), q, { transA: true }), () => matmul(probs, dy, { transA: true })];
  });
}
