// One training step and evaluation. A step records forward, backward and the optimizer update into
// one command buffer; the loss is the only value read back.
import { backward, crossEntropyRows, dispose, noGrad, softmaxCrossEntropy, tensor, Tensor, tidy, type Storage } from '@tabfleet/tensor';
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

/** Records one step (in micro-batches of at most `microBatch` examples); returns the loss tensor (caller reads it). */
export function recordTrainStep(model: Model, opt: Optimizer, batch: Batch, microBatch = batch.size): Tensor {
  return recordGradientStep(model, batch, () => opt.step(), microBatch);
}

/** A batch cut into micro-batches of at most `micro` examples (the last may be smaller). */
export function microBatches(b: Batch, micro: number): Batch[] {
  if (!(Number.isInteger(micro) && micro >= 1)) throw new Error(`micro-batch ${micro}: need a positive integer`);
  if (micro >= b.size) return [b];
  const xPer = b.x.length / b.size, yPer = b.y.length / b.size;
  const out: Batch[] = [];
  for (let s = 0; s < b.size; s += micro) {
    const n = Math.min(micro, b.size - s);
    out.push({ x: b.x.subarray(s * xPer, (s + n) * xPer), y: b.y.subarray(s * yPer, (s + n) * yPer), size: n });
  }
  return out;
}

/**
 * Records forward and backward only: the gradient is left in the store's flat gradient buffer (for a
 * sync strategy to average) unless `then` applies it. Returns the loss tensor. With a `microBatch`
 * smaller than the batch, each micro-batch's gradient is added into an accumulator weighted by its
 * share of the examples, so the result is the whole batch's mean gradient with a micro-batch's memory.
 */
export function recordGradientStep(model: Model, batch: Batch, then?: () => void, microBatch = batch.size): Tensor {
  const parts = microBatches(batch, microBatch);
  if (parts.length === 1) return recordWholeBatch(model, batch, then);
  const be = model.store.backend, n = model.store.length, grads = model.store.flatGrads;
  const acc = be.alloc(n, 'f32');
  const lossAcc = be.alloc(1, 'f32');
  be.fill(acc, 0);
  be.fill(lossAcc, 0);
  const addScaled = (into: Storage, from: Storage, size: number, weight: number) => {
    const scaled = be.unary('scale', from, size, weight);
    const sum = be.binary('add', into, scaled, [size], [1], [1]);
    be.copy(into, sum);
    be.release(scaled);
    be.release(sum);
  };
  try {
    for (const part of parts) {
      const loss = recordWholeBatch(model, part);
      addScaled(acc, grads, n, part.size / batch.size);
      addScaled(lossAcc, loss.storage, 1, part.size / batch.size);
      dispose(loss);
    }
    be.copy(grads, acc);
    if (then) tidy(then);
  } catch (e) {
    be.release(lossAcc);
    throw e;
  } finally {
    be.release(acc);
  }
  return new Tensor(be, lossAcc, [1]);
}

function recordWholeBatch(model: Model, batch: Batch, then?: () => void): Tensor {
  const { x, y } = upload(model, batch);
  try {
    return tidy(() => {
      const l = softmaxCrossEntropy(model.forward(x), y);
      // Every reached parameter's slot is overwritten, so only unreached ones need zeroing.
      model.store.zeroGradsExcept(backward(l));
      then?.();
      return l;
    });
  } finally {
    dispose(x);
    dispose(y);
  }
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
 * the host takes both the argmax and the cross-entropy. `betweenBatches` is awaited between two
 * batches: where a caller lets its event loop run.
 */
export async function evaluate(model: Model, batches: Iterable<Batch>, betweenBatches?: () => Promise<void>): Promise<EvalResult> {
  let lossSum = 0, correct = 0, count = 0;
  for (const b of batches) {
    if (count > 0) await betweenBatches?.();
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
