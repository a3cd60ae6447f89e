// Softmax and the fused, numerically stable softmax cross-entropy.
import { assertShape } from '../shape';
import { derived, type Tensor } from '../tensor';

/** logits: [B, C], labels: i32 [B] → mean loss [1]. */
export function softmaxCrossEntropy(logits: Tensor, labels: Tensor): Tensor {
  const [B, C] = logits.shape;
  assertShape('cross-entropy logits', logits.shape, [B, C]);
  assertShape('cross-entropy labels', labels.shape, [B]);
  if (labels.dtype !== 'i32') throw new Error('cross-entropy labels must be i32');
  const be = logits.backend;
  const { loss, probs } = be.softmaxCrossEntropy(logits.storage, labels.storage, B, C);
  const meanLoss = be.reduce('mean', loss, 1, B, 1);
  be.release(loss);
  const probsT = derived(be, probs, [B, C], [], 'softmax_probs', () => []);
  return derived(be, meanLoss, [1], [logits, labels], 'softmax_cross_entropy', (dy) => [
    () => derived(be, be.softmaxCrossEntropyBackward(probsT.storage, labels.storage, dy.storage, B, C), [B, C], [], 'dlogits', () => []),
    null,
  ]);
}

/**
 * Per-row evaluation without reading logits back: logits [B, C], labels i32 [B] → [2, B]: row 0 the
 * cross-entropy of each row, row 1 the largest probability of each row. A row is predicted right when
 * its label's probability, exp(−loss), is that largest one. No gradient.
 */
export function crossEntropyRows(logits: Tensor, labels: Tensor): Tensor {
  const [B, C] = logits.shape;
  assertShape('cross-entropy logits', logits.shape, [B, C]);
  assertShape('cross-entropy labels', labels.shape, [B]);
  const be = logits.backend;
  const { loss, probs } = be.softmaxCrossEntropy(logits.storage, labels.storage, B, C);
  const maxProb = be.reduce('max', probs, B, C, 1);
  be.release(probs);
  const out = be.alloc(2 * B, 'f32');
  be.copyRange(loss, 0, out, 0, B);
  be.copyRange(maxProb, 0, out, B, B);
  be.release(loss);
  be.release(maxProb);
  return derived(be, out, [2, B], [], 'cross_entropy_rows', () => []);
}

/** Softmax over the last dim. causal: x is [..., T, T] and row t only sees columns ≤ t. */
export function softmax(x: Tensor, causal = false): Tensor {
  const C = x.shape[x.shape.length - 1];
  const rows = x.size / C;
  const T = causal ? x.shape[x.shape.length - 2] : 0;
  if (causal && T !== C) throw new Error(`causal softmax needs square [.., T, T] scores, got [${x.shape}]`);
  const be = x.backend;
  const y: Tensor = derived(be, be.softmax(x.storage, rows, C, T), x.shape, [x], 'softmax', (dy) => [
    () => derived(be, be.softmaxBackward(y.storage, dy.storage, rows, C), x.shape, [], 'softmax_grad', () => []),
  ]);
  return y;
}
