// One training step and evaluation. A step records forward, backward and the optimizer update into
// one command buffer; the loss is the only value read back.
import { backward, crossEntropyRows, dispose, noGrad, softmaxCrossEntropy, tensor, tidy, type Tensor } from '@tabfleet/tensor';
import type { Model } from './models/model';
import type { Optimizer } from './optim';

export interface Batch {
  /** Features (f32) or token ids (i32), laid out as model.inputShape(batch). */
  x: Float32Array | Int32Array;
  /** Class ids or next-token ids, one per logit row. */
  y: Int32Array;
  size: number;
}

function upload(model: Model, b: Batch): { x: Tensor; y: Tensor } {
  const be = model.store.backend;
  // Token ids go up with their positions grouped by id, for the embedding gradient.
  return { x: tensor(be, b.x, model.inputShape(b.size), false, { groupIds: model.inputDType === 'i32' }), y: tensor(be, b.y, [b.y.length]) };
}

/** Records one step; returns the loss tensor (caller reads it). */
export function recordTrainStep(model: Model, opt: Optimizer, batch: Batch): Tensor {
  return recordGradientStep(model, batch, () => opt.step());
}

/**
 * Records forward and backward only: the gradient is left in the store's flat gradient buffer (for a
 * sync strategy to average) unless `then` applies it. Returns the loss tensor.
 */
export function recordGradientStep(model: Model, batch: Batch, then?: () => void): Tensor {
  const { x, y } = upload(model, batch);
  const loss = tidy(() => {
    const l = softmaxCrossEntropy(model.forward(x), y);
    // Every reached parameter's slot is overwritten, so only unreached ones need zeroing.
    model.store.zeroGradsExcept(backward(l));
    then?.();
    return l;
  });
  dispose(x);
  dispose(y);
  return loss;
}

/** One step; resolves to the mean loss of the batch. */
export async function trainStep(model: Model, opt: Optimizer, batch: Batch): Promise<number> {
  const loss = recordTrainStep(model, opt, batch);
  try {
    return (await loss.data())[0];
  } finally {
    dispose(loss);
  }
}

export interface EvalResult {
  loss: number;
  accuracy: number;
  count: number;
}

/**
 * Mean loss and accuracy over batches (no gradients). One readback per batch: the logits, from which
 * the host takes both the argmax and the cross-entropy.
 */
export async function evaluate(model: Model, batches: Iterable<Batch>): Promise<EvalResult> {
  let lossSum = 0, correct = 0, count = 0;
  for (const b of batches) {
    const x = tensor(model.store.backend, b.x, model.inputShape(b.size));
    const y = tensor(model.store.backend, b.y, [b.y.length]);
    // Two floats per row come back, not the logits (B·T·vocab floats for a language model).
    const rows = noGrad(() => tidy(() => crossEntropyRows(model.forward(x), y)));
    const v = await rows.data();
    for (const t of [x, y, rows]) dispose(t);
    const n = b.y.length;
    for (let r = 0; r < n; r++) {
      lossSum += v[r];
      // Right when the label's probability is the row's largest (to rounding: exp(−loss) is recomputed here).
      if (Math.exp(-v[r]) >= v[n + r] * (1 - 1e-5)) correct++;
    }
    count += n;
  }
  return { loss: lossSum / count, accuracy: correct / count, count };
}
