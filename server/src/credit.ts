// How a contributor is shown: by its display name, or by a short name derived from its client id
// (the id itself never leaves the server: whoever knows it is that volunteer for credit).
import { createHash } from 'node:crypto';
import type { PublicContributor, WorkerRow } from '@tabfleet/protocol';
import type { ContributorRecord } from './store/store';

export function anonymousName(clientId: string): string {
  return `volunteer ${createHash('sha256').update(clientId).digest('hex').slice(0, 8)}`;
}

export function contributorName(clientId: string, displayName: string | null | undefined): string {
  return displayName ?? anonymousName(clientId);
}

/** A worker-table row for a contributor that is no longer in the job. */
export function departedRow(c: ContributorRecord, displayName: string | null | undefined, faults: number | null, reputation: WorkerRow['reputation'] = null,
  lastFault: string | null = null): WorkerRow {
  return {
    volunteerId: c.volunteerId, jobId: c.jobId, state: 'left', hidden: false, contributor: contributorName(c.clientId, displayName), syncs: c.syncs,
    adapter: c.adapter, backend: c.backend, step: c.step, samplesPerSec: 0, bytesSent: c.bytesSent, bytesReceived: c.bytesReceived, downloadedBytes: null,
    lastRound: null, lastRoundMs: null, lastRoundMode: null, admitted: false, faults, reputation, pace: null, links: null,
    group: null, lastFault, leftReason: c.leftReason ?? null,
  };
}

export function publicContributor(c: ContributorRecord, displayName: string | undefined): PublicContributor {
  return {
    name: contributorName(c.clientId, displayName), named: displayName !== undefined, samples: c.samples, syncs: c.syncs, computeMs: c.computeMs,
    firstAt: c.firstAt, lastAt: c.lastAt,
  };
}
