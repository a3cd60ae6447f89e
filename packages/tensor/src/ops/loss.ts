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
