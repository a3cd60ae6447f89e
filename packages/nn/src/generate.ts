// Autoregressive sampling from a sequence model: run the window of the last `context` ids, take the
// last position's logits (sliced on the device, so one row of `vocab` floats is read back, not the
// window's), and draw the next id with temperature and top-k. No KV cache: each token re-runs the
// window, which is fine for the models a tab trains and keeps one code path with training.
import { Rng } from '@tabfleet/protocol';
import { dispose, noGrad, sliceRows, tensor, tidy } from '@tabfleet/tensor';
import type { Model } from './models/model';

export interface SampleOptions {
  /** New tokens to draw. */
  length: number;
  /** Softmax temperature; 0 is greedy (the most likely id every time). */
  temperature: number;
  /** Draw only among the k most likely ids (0: all). */
  topK: number;
  seed: number;
  /** Called with each new id as it is drawn, e.g. to show text as it grows. */
  onToken?: (id: number) => void;
}

/** prompt ids (at least one) → the new ids. */
export async function generate(model: Model, prompt: Int32Array, opts: SampleOptions): Promise<Int32Array> {
  const context = model.preset.kind === 'gpt' || model.preset.kind === 'transformer' ? model.preset.context : 0;
  if (!context) throw new Error(`a ${model.preset.kind} model does not generate sequences`);
  if (prompt.length === 0) throw new Error('the prompt needs at least one token');
  if (!(opts.temperature >= 0) || !(opts.topK >= 0) || !Number.isInteger(opts.length) || opts.length < 0) throw new Error('sampling needs length ≥ 0, temperature ≥ 0, topK ≥ 0');
  const rng = new Rng(opts.seed);
  const ids = Array.from(prompt);
  const out = new Int32Array(opts.length);
  for (let n = 0; n < opts.length; n++) {
    const window = Int32Array.from(ids.slice(-context));
    const T = window.length;
    const x = tensor(model.store.backend, window, [1, T]);
    const last = noGrad(() => tidy(() => sliceRows(model.forward(x), T - 1, 1)));
    const logits = (await last.data()) as Float32Array;
    dispose(x);
    dispose(last);
    const id = drawId(logits, opts.temperature, opts.topK, rng);
    out[n] = id;
    ids.push(id);
    opts.onToken?.(id);
  }
  return out;
}

/** One id from logits: argmax at temperature 0, else a draw from softmax(logits / temperature) over the top k. */
export function drawId(logits: Float32Array, temperature: number, topK: number, rng: Rng): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  if (temperature === 0 || topK === 1) return best;
  let candidates = Array.from(logits.keys());
  if (topK > 0 && topK < logits.length) candidates = candidates.sort((a, b) => logits[b] - logits[a] || a - b).slice(0, topK);
  const weights = candidates.map((i) => Math.exp((logits[i] - logits[best]) / temperature));
  let r = rng.next() * weights.reduce((a, b) => a + b, 0);
  for (let j = 0; j < candidates.length; j++) {
    r -= weights[j];
    if (r <= 0) return candidates[j];
  }
  return candidates[candidates.length - 1];
}
