// Volunteer credit, as BOINC and Folding@home volunteers expect it: a browser keeps one client id and
// an optional display name; the server counts what it observed each identity do (committed syncs and
// the samples they stand for) and shows it on public pages that need no researcher token.
import { z } from 'zod';
import { type JobSpec, type JobState } from './jobs';
import { peakSyncVectorLength, type StreamingRef } from './models';
import { quantizedBytes } from './quantize';

/**
 * What a volunteer may call itself on public pages: 1–40 characters of letters, digits, spaces and
 * `. _ ' -`, starting with a letter or digit. No markup, no control characters.
 */
export const displayNameSchema = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(40, 'at most 40 characters')
  .regex(/^[\p{L}\p{N}][\p{L}\p{N} ._'-]*$/u, "letters, digits, spaces and . _ ' - only, starting with a letter or digit");

/** Sets (or, with null, clears) the display name of the connected volunteer's client id. */
export const profileSchema = z.strictObject({ displayName: displayNameSchema.nullable() });

/** A browser's client id: chosen once, kept in its storage, and never shown on public pages. */
export const clientIdSchema = z.string().regex(/^[\w-]{16,64}$/, '16 to 64 letters, digits, _ or -');

/** `POST /api/public/credit`: the client id in the body, so it stays out of URLs and logs. */
export const creditRequestSchema = z.strictObject({ clientId: clientIdSchema }).meta({ id: 'CreditRequest' });

/** Totals the server observed for one identity: in one job, or over all jobs. */
export interface CreditTotals {
  /** Training examples of the syncs it took part in (steps per sync × batch size each). */
  samples: number;
  /** Committed syncs it was a member of. */
  syncs: number;
  /** Time between being handed work and reporting ready for the sync, as the server saw it. */
  computeMs: number;
}

/** One row of a job's public contributor list. */
export interface PublicContributor extends CreditTotals {
  /** The volunteer's display name, or `volunteer <8 hex>` derived from its client id. */
  name: string;
  named: boolean;
  firstAt: number;
  lastAt: number;
}

/** `GET /api/public/jobs/:id/contributors`. */
export interface PublicContributors {
  job: { id: string; name: string; state: JobState; preset: string; dataset: string; strategy: string };
  contributors: PublicContributor[];
}

/** A job as the volunteer page sees it before contributing (`GET /api/public/info`). */
export interface PublicJob {
  id: string;
  name: string;
  state: JobState;
  preset: string;
  dataset: string;
  strategy: string;
  compression: string;
  workers: number;
  minWorkers: number;
  maxWorkers: number;
  step: number;
  targetSteps: number;
  /** Size of the model the tab's adapter must hold (4 bytes per parameter). */
  modelBytes: number;
  /** Bytes one worker sends per sync: measured at the last sync, else `estimateSyncBytes`. */
  syncBytes: number;
  syncBytesMeasured: boolean;
  latestAccuracy: number | null;
}

/** `GET /api/public/info`: who runs this server and which job a new volunteer would join. */
export interface PublicInfo {
  server: { name: string; operator: string | null };
  /** Open jobs in the order the scheduler offers them (first: the one a new volunteer joins). */
  jobs: PublicJob[];
}

/**
 * `GET /api/public/embed`: whether the page asking (by its Origin header) may embed the contribute
 * widget (`--allow-origin`), and whose server it is. Any origin may read it, so a page not allowed
 * can say why it shows no widget.
 */
export interface EmbedPermission {
  allowed: boolean;
  /** The Origin the request came with (null: none, as from the server's own pages). */
  origin: string | null;
  server: { name: string; operator: string | null };
}

/** `POST /api/public/credit { clientId }`: this browser's totals, over all jobs. */
export interface VolunteerCredit extends CreditTotals {
  displayName: string | null;
  jobs: number;
}

/**
 * Bytes one member sends per sync with `members` in the ring (docs/protocol.md): dense allreduce
 * sends 2(N−1)/N of the vector (4 bytes a value, 2 with fp16); DGC's sparse allgather forwards each
 * kept pair N−1 times at 2 bytes (f16) plus a 1-byte gap index (2 bytes past 99.2% sparsity).
 * Quantized payloads (int8, e2m1) go round by quantized allgather: each member's encoded vector is
 * forwarded N−1 times; in an untrusted job's group, (N−1)/N of it goes to the parts' owners and each
 * owner's f16 aggregate to the N−1 others. Frame headers (28 bytes per 64 KiB) are left out, and so are
 * validators' copies of checked parts.
 */
export function estimateSyncBytes(spec: StreamingRef & Pick<JobSpec, 'compression' | 'sparsity'> & Partial<Pick<JobSpec, 'trust'>>, members: number): number {
  const n = Math.max(2, members);
  // Streaming DiLoCo: its largest fragment, the peak sync.
  const length = peakSyncVectorLength(spec);
  if (spec.compression === 'dgc') {
    const pairBytes = 2 + (spec.sparsity > 0.992 ? 2 : 1);
    return Math.ceil(length * (1 - spec.sparsity)) * pairBytes * (n - 1);
  }
  if (spec.compression === 'int8' || spec.compression === 'e2m1') {
    if (spec.trust === 'untrusted') return Math.round(((n - 1) / n) * (quantizedBytes(length, spec.compression) + 2 * length));
    return quantizedBytes(length, spec.compression) * (n - 1);
  }
  const valueBytes = spec.compression === 'fp16' ? 2 : 4;
  return Math.round(((2 * (n - 1)) / n) * length * valueBytes);
}
