// Synthetic data sets for fast tests: seeded Gaussian blobs, learnable and instant.
import { Rng } from '@tabfleet/protocol';
import type { Dataset } from './dataset';

/** `count` points in `features` dims around `classes` random centres (noise std 1, centres std 3). */
export function gaussianBlobs(count: number, features: number, classes: number, seed: number): Dataset {
  const rng = new Rng(seed);
  const centres = Float32Array.from({ length: classes * features }, () => rng.normal() * 3 / Math.sqrt(features) * 2);
  const x = new Float32Array(count * features);
  const y = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const c = rng.int(classes);
    y[i] = c;
    for (let f = 0; f < features; f++) x[i * features + f] = centres[c * features + f] + rng.normal() * 0.5;
  }
  return { x, y, count, features, labelsPerExample: 1, classes };
}
