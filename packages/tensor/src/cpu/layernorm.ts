// Reference layer norm over the last dim of [rows, C], forward and backward.
import type { FloatArray } from './backend';

export function layerNormRef(
  x: FloatArray, gamma: FloatArray, beta: FloatArray, rows: number, C: number, eps: number,
  y: FloatArray, mean: FloatArray, rstd: FloatArray,
) {
  for (let r = 0; r < rows; r++) {
    let mu = 0;
    for (let c = 0; c < C; c++) mu += x[r * C + c];
    mu /= C;
    let v = 0;
    for (let c = 0; c < C; c++) v += (x[r * C + c] - mu) ** 2;
    const rs = 1 / Math.sqrt(v / C + eps);
    for (let c = 0; c < C; c++) y[r * C + c] = (x[r * C + c] - mu) * rs * gamma[c] + beta[c];
    mean[r] = mu;
    rstd[r] = rs;
  }
  return { y, mean, rstd };
}

export function layerNormBackwardRef(
  dy: FloatArray, x: FloatArray, gamma: FloatArray, mean: FloatArray, rstd: FloatArray, rows: number, C: number,
  dx: FloatArray, dgamma: FloatArray, dbeta: FloatArray,
) {
  for (let r = 0; r < rows; r++) {
    let sumG = 0, sumGX = 0;
    for (let c = 0; c < C; c++) {
      const xhat = (x[r * C + c] - mean[r]) * rstd[r];
      const g = dy[r * C + c] * gamma[c];
      sumG += g;
      sumGX += g * xhat;
      dgamma[c] += dy[r * C + c] * xhat;
      dbeta[c] += dy[r * C + c];
    }
    for (let c = 0; c < C; c++) {
      const xhat = (x[r * C + c] - mean[r]) * rstd[r];
      const g = dy[r * C + c] * gamma[c];
      dx[r * C + c] = rstd[r] * (g - sumG / C - xhat * sumGX / C);
    }
  }
  return { dx, dgamma, dbeta };
}
