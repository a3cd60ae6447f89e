// A uniformly random order (Fisher–Yates on the server's own randomness), for choosing seats and peers,
// and a uniform number in [0, 1) from the same source, for draws a member must not predict.
import { randomInt } from 'node:crypto';

export function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** Uniform in [0, 1) from node:crypto (Math.random's generator can be reconstructed from its outputs). */
export function uniform(): number {
  return randomInt(2 ** 47) / 2 ** 47;
}
