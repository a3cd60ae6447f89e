// The credit ledger of one job: each identity's part in it, counted from what the server saw (syncs,
// samples, time from being handed work to being ready) and what its tab last reported (step,
// bytes), kept through leaving and rejoining, and written to the store in batches.
import type { Capabilities, WorkerRow } from '@tabfleet/protocol';
import { contributorName, departedRow } from '../credit';
import type { ContributorRecord } from '../store/store';
import type { Member } from './members';
import type { Clock } from './types';

/** Joins and departures are written at most this often (one batched write, not one per member). */
const FLUSH_MS = 1_000;
/**
 * Credit (a committed sync, for every member) is written at most this often, and at once when the job
 * ends. At 1 s a job of 100 in rounds of ~2 s rewrote its 100 rows every sync, 2% of a node's CPU at
 * 5,000 volunteers (coordinator bench profile); at 10 s each row is written once in several syncs. A
 * crash loses at most this much credit.
 */
const CREDIT_FLUSH_MS = 10_000;
/**
 * What tabs report in their heartbeats (step, bytes: every 2 s each) is written at most this often, or
 * with the next credit. Each one scheduled a write of its row within a second: at 6,000 volunteers on
 * Redis about half the store's commands, which delayed the nodes' lease renewals (coordinator bench).
 */
const REPORT_FLUSH_MS = 30_000;

/** What the ledger needs of a member. */
export interface Contributing {
  identity: string;
  volunteerId: string;
  displayName?: string | null;
  capabilities: Capabilities;
  /** Moshpit jobs: its group at the last sync it committed with. */
  group?: WorkerRow['group'];
}

export class ContributorLedger {
  private readonly records = new Map<string, ContributorRecord>();
  private readonly names = new Map<string, string>();
  /** The Moshpit group of each identity that left, at its last committed sync (in memory: the table shows it while a node holds the job). */
  private readonly lastGroups = new Map<string, NonNullable<WorkerRow['group']>>();
  private readonly dirty = new Set<string>();
  private cancelFlush: (() => void) | null = null;
  /** When the scheduled write runs (epoch ms; null: none scheduled). */
  private flushAt: number | null = null;

  /** `save` queues a batch for the store (the coordinator's ordered writes). */
  constructor(private readonly jobId: string, private readonly clock: Clock, private readonly save: (records: ContributorRecord[]) => void) {}

  /** What the store held when the job was loaded: nobody is a member now, so each has left. */
  restore(records: ContributorRecord[], names: Map<string, string>): void {
    for (const [id, name] of names) this.names.set(id, name);
    for (const x of records) this.records.set(x.clientId, { ...x, leftReason: x.leftReason ?? 'server restarted' });
  }

  joined(m: Contributing): void {
    const now = this.clock.now();
    const known = this.records.get(m.identity);
    this.records.set(m.identity, {
      jobId: this.jobId, clientId: m.identity, samples: 0, syncs: 0, computeMs: 0, step: 0, bytesSent: 0, bytesReceived: 0, firstAt: now,
      ...known, volunteerId: m.volunteerId, adapter: describeAdapter(m), backend: m.capabilities.backend, lastAt: now, leftReason: null,
    });
    if (m.displayName) this.names.set(m.identity, m.displayName);
    this.mark(m.identity);
  }

  /** `stillPresent`: another tab of the same identity is still in the job (then nothing changes). */
  departed(m: Contributing, reason: string, stillPresent: boolean): void {
    const c = this.records.get(m.identity);
    if (!c || stillPresent) return;
    Object.assign(c, { volunteerId: m.volunteerId, lastAt: this.clock.now(), leftReason: reason });
    if (m.group) this.lastGroups.set(m.identity, m.group);
    this.mark(m.identity);
  }

  /** A committed sync: one sync, `samples` trained, `computeMs` from being handed work to being ready. Nothing the member claims. */
  credit(identity: string, samples: number, computeMs: number, now: number): void {
    const c = this.records.get(identity);
    if (!c) return;
    c.syncs += 1;
    c.samples += samples;
    c.computeMs += computeMs;
    c.lastAt = now;
    this.mark(identity, CREDIT_FLUSH_MS);
  }

  /** What the tab reports in its heartbeat (only from its latest connection). */
  reported(identity: string, volunteerId: string, status: { step: number; bytesSent: number; bytesReceived: number }): void {
    const c = this.records.get(identity);
    if (!c || c.volunteerId !== volunteerId) return;
    Object.assign(c, { step: status.step, bytesSent: status.bytesSent, bytesReceived: status.bytesReceived });
    this.mark(identity, REPORT_FLUSH_MS);
  }

  syncs(identity: string): number {
    return this.records.get(identity)?.syncs ?? 0;
  }

  name(identity: string): string | undefined {
    return this.names.get(identity);
  }

  /** Everyone who contributed and is not among `present` identities. */
  absent(present: ReadonlySet<string>): ContributorRecord[] {
    return [...this.records.values()].filter((c) => !present.has(c.clientId));
  }

  /** Writes every changed record now. */
  flush(): void {
    this.cancelFlush?.();
    this.cancelFlush = null;
    this.flushAt = null;
    if (this.dirty.size === 0) return;
    const records = [...this.dirty].map((id) => ({ ...this.records.get(id)! }));
    this.dirty.clear();
    this.save(records);
  }

  /** The identity's row changed: written within `withinMs` (sooner if another change asks for sooner). */
  private mark(identity: string, withinMs = FLUSH_MS): void {
    this.dirty.add(identity);
    const at = this.clock.now() + withinMs;
    if (this.flushAt !== null && this.flushAt <= at) return;
    this.cancelFlush?.();
    this.flushAt = at;
    this.cancelFlush = this.clock.after(withinMs, () => this.flush());
  }

  /**
   * The worker table: the members, then everyone who contributed and is no longer in the job (state
   * `left`, with why), with their faults (the last one's reason) and reputation, and each member's Moshpit group; paced jobs show each member's pace, steps and share.
   */
  table(members: Iterable<Member>, paced: boolean, faults: { offences(identity: string): number; lastFault(identity: string): string | null },
    reputation: (identity: string) => WorkerRow['reputation'], links: { of(volunteerId: string): WorkerRow['links'] }): WorkerRow[] {
    const list = [...members];
    const live = list.map((m): WorkerRow => ({
      volunteerId: m.volunteerId, jobId: this.jobId, state: m.status.state, hidden: m.status.hidden, contributor: contributorName(m.identity, this.name(m.identity)),
      syncs: this.syncs(m.identity), adapter: describeAdapter(m), backend: m.capabilities.backend,
      step: m.status.step, samplesPerSec: m.status.samplesPerSec, bytesSent: m.status.bytesSent, bytesReceived: m.status.bytesReceived,
      downloadedBytes: m.phase === 'loading' ? (m.status.downloadedBytes ?? null) : null,
      lastRound: m.lastRound, lastRoundMs: m.lastRoundMs, lastRoundMode: m.lastRoundMode, admitted: m.phase !== 'loading', faults: faults.offences(m.identity), reputation: reputation(m.identity),
      pace: paced ? { msPerStep: m.msPerStep === null ? null : Math.round(m.msPerStep * 10) / 10, steps: m.steps, share: m.share } : null,
      links: links.of(m.volunteerId), group: m.group, lastFault: faults.lastFault(m.identity), leftReason: null,
    }));
    const departed = this.absent(new Set(list.map((m) => m.identity)))
      .map((c) => ({ ...departedRow(c, this.name(c.clientId), faults.offences(c.clientId), reputation(c.clientId), faults.lastFault(c.clientId)), group: this.lastGroups.get(c.clientId) ?? null }));
    return [...live, ...departed];
  }
}

export function describeAdapter(m: Pick<Contributing, 'capabilities'>): string {
  const a = m.capabilities.adapter;
  const name = [a.vendor, a.architecture, a.device || a.description].filter(Boolean).join(' ');
  return `${name || 'unknown adapter'}${m.capabilities.backend === 'cpu' ? ' (CPU fallback)' : ''}`;
}
