// A uniformly random order (Fisher–Yates on the server's own randomness), for choosing seats and peers.
import { randomInt } from 'node:crypto';

export function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
