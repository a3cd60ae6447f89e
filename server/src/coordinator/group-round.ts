// A group round (untrusted jobs) once every member's result is in, before it may commit: the
// members' digests are cross-checked (group-check.ts), a few parts are recomputed by validators, and
// an owner–validator dispute is settled from the members' evidence (group-validation.ts). The
// coordinator owns the round; this decides whether it commits, and whom it removes.
import { ProtocolError, cappedWeights, modelDigest, partRange, type JobSpec, type VolunteerEventParsed } from '@tabfleet/protocol';
import { disputedParts, settleDigestDisputes } from './digest-disputes';
import { checkGroup, type GroupVerdict } from './group-check';
import { decodeEvidence, judgeValidations, partRecompute, partTruth, settleDispute, validationFits } from './group-validation';
import type { ActiveRound } from './round';
import { uniform } from './shuffle';
import { drawChecks } from './validation-draw';
import type { CoordinatorDeps } from './types';

/** What the checks need from the coordinator. */
export interface GroupRoundHost {
  readonly jobId: string;
  readonly spec: JobSpec;
  readonly deps: Pick<CoordinatorDeps, 'toVolunteer' | 'log' | 'count'>;
  commit(r: ActiveRound): void;
  /** Aborts the round (nothing is applied), removes `liars` for an integrity fault, and forms a new round. */
  reject(r: ActiveRound, liars: string[], why: string, fault?: string): void;
  /** Whether a member's identity is on probation (its parts are checked first). */
  onProbation(volunteerId: string): boolean;
  /** A check confirmed a part this member owned or recomputed. */
  verified(volunteerId: string): void;
  /** Whether two members are of one network (false for all where networks do not count). */
  sameNetwork(a: string, b: string): boolean;
  /** One voice among a round's members: its network where networks count, else the member itself. */
  voiceOf(volunteerId: string): string;
  /** Whether checks confirmed enough of this member's work for its word to count against a newcomer's (standing.ts). */
  hasStanding(volunteerId: string): boolean;
  /** The round was not applied and these members sit out the next sync (an accusation nobody could settle). */
  sitOut(volunteerIds: string[], why: string): void;
}

export class GroupRoundChecks {
  constructor(private readonly host: GroupRoundHost) {}

  /** Whether the round waits on `id` for a validation or evidence (after its result). */
  static owes(r: ActiveRound, id: string): boolean {
    if (r.disputes) return [...r.disputes.values()].some((d) => !d.evidence.has(id));
    return !!r.validation && r.validation.checks.some((c) => c.validator === id) && !r.validation.reports.has(id);
  }

  /** Every result is in: a group round's digests are cross-checked and some of its parts validated before it commits. */
  resultsIn(r: ActiveRound): void {
    const refused = this.agrees(r);
    if (!refused) return;
    // Their values were left out of this sync; they take no part in the next.
    r.removeAtCommit = refused.map((x) => ({ member: x.member, reason: `its contributions to round ${r.roundId} were refused by most owners (${x.reasons[0].slice(0, 200)})` }));
    // Validators are drawn after the results, from randomness no member can predict (a liar could else lie only when unchecked),
    // and every part at the same share whoever else is in the group (validation-draw.ts).
    const checks = drawChecks(r.members, uniform, new Set(r.members.filter((id) => this.host.onProbation(id))), (a, b) => this.host.sameNetwork(a, b));
    if (checks.length === 0) return this.host.commit(r);
    r.validation = { checks, reports: new Map() };
    this.host.deps.toVolunteer(r.members, 'round:validate', { jobId: this.host.jobId, roundId: r.roundId, checks });
  }

  onValidation(m: { volunteerId: string }, r: ActiveRound, e: VolunteerEventParsed<'round:validation'>): object {
    const v = r.validation;
    if (!v || r.disputes) throw new ProtocolError('conflict', `round ${r.roundId} is not being validated`);
    if (!v.checks.some((c) => c.validator === m.volunteerId)) throw new ProtocolError('conflict', `${m.volunteerId} validates no part of round ${r.roundId}`);
    if (v.reports.has(m.volunteerId)) return { duplicate: true };
    const misfit = validationFits(r.members, v.checks, m.volunteerId, e.parts);
    if (misfit) throw new ProtocolError('bad_request', misfit);
    v.reports.set(m.volunteerId, e.parts);
    if (v.checks.every((c) => v.reports.has(c.validator))) this.validationsIn(r);
    return {};
  }

  /** Every validator reported: commit, blame a pair that disagrees, or settle an owner–validator dispute with evidence. */
  private validationsIn(r: ActiveRound): void {
    const v = r.validation!;
    const reports = new Map([...r.results].map(([id, x]) => [id, x.group!]));
    const verdict = judgeValidations(r.members, reports, v.checks, v.reports);
    this.host.deps.count('rounds_validated');
    if (verdict.mismatches.length) {
      const evidence = verdict.mismatches.map((x) => `${x.from}→${x.to} (part ${x.part})`).join(', ');
      this.host.deps.log(`job ${this.host.jobId}: round ${r.roundId}: validators received other contributions than were sent: ${evidence}; blamed: ${verdict.liars.join(', ')}`);
      return this.host.reject(r, verdict.liars, `validation digests disagree (${evidence.slice(0, 300)})`);
    }
    const disputed = new Set(verdict.disputes.map((d) => d.part));
    for (const c of v.checks) {
      // Two identities of one network confirming each other would be standing for free.
      if (disputed.has(c.part) || this.host.sameNetwork(r.members[c.part], c.validator)) continue;
      this.host.verified(r.members[c.part]);
      this.host.verified(c.validator);
    }
    if (verdict.disputes.length === 0) return this.host.commit(r);
    r.disputes = new Map(verdict.disputes.map((d) => [d.part, { ...d, evidence: new Map() }]));
    for (const d of verdict.disputes) {
      this.host.deps.count('validation_disputes');
      const claims = `validator ${d.validator} computed ${d.validatorAggregate || '(all refused)'}, owner ${d.owner} reports ${d.ownerAggregate}`;
      this.host.deps.log(`job ${this.host.jobId}: round ${r.roundId}: part ${d.part}: ${claims}; asking every member for its contribution`);
      this.host.deps.toVolunteer(r.members, 'evidence:request', { jobId: this.host.jobId, roundId: r.roundId, part: d.part });
    }
  }

  /** A member's contribution to a disputed part: it must be what it reported sending the owner. */
  onEvidence(m: { volunteerId: string }, r: ActiveRound, e: VolunteerEventParsed<'evidence:upload'>): object {
    const d = r.disputes?.get(e.part);
    if (!d) throw new ProtocolError('conflict', `no evidence of part ${e.part} was asked in round ${r.roundId}`);
    if (d.evidence.has(m.volunteerId)) return { duplicate: true };
    const digestDispute = !!d.mismatches;
    const { length, block } = partRecompute(this.host.spec);
    const { start, end } = partRange(length, r.members.length, e.part, block);
    const values = decodeEvidence(e.data, end - start);
    if (typeof values === 'string') throw new ProtocolError('bad_tensor', values);
    const recorded = r.results.get(m.volunteerId)!.group!.digests.sent[e.part];
    if (modelDigest(values) !== recorded) {
      this.host.deps.log(`job ${this.host.jobId}: round ${r.roundId}: ${m.volunteerId}'s evidence for part ${e.part} has digest ${modelDigest(values)}, it reported sending ${recorded}`);
      const why = `${m.volunteerId}'s evidence for part ${e.part} is not what it reported sending`;
      if (digestDispute) this.host.reject(r, [m.volunteerId], `the group's digests disagree (${why})`, `what it reported disagrees with its group (${why})`);
      else this.host.reject(r, [m.volunteerId], why);
      return {};
    }
    d.evidence.set(m.volunteerId, values);
    if (![...r.disputes!.values()].every((x) => x.evidence.size === r.members.length)) return {};
    if (digestDispute) this.settleDigests(r);
    else this.settleDisputes(r);
    return {};
  }

  /**
   * Every member's evidence of the parts the digests dispute is in: the server recomputes each part and
   * convicts only whom the recomputation (or a member with standing facing a newcomer) shows lied
   * (digest-disputes.ts). The round is never applied: the members' models may differ.
   */
  private settleDigests(r: ActiveRound): void {
    const disputes = [...r.disputes!.values()];
    const weights = r.steps ? cappedWeights(r.members.map((id) => r.steps![id])) : undefined;
    const truth = new Map(disputes.map((d) => [d.part, partTruth(r.members.map((id) => d.evidence.get(id)!), this.host.spec, weights)]));
    const verdict = settleDigestDisputes(disputes.map((d) => ({ part: d.part, owner: d.owner, ownerAggregate: d.ownerAggregate, mismatches: d.mismatches! })), truth,
      (id) => r.results.get(id)?.checksum, (id) => this.host.hasStanding(id), { members: r.members, of: (id) => this.host.voiceOf(id) });
    const evidence = verdict.findings.join('; ').slice(0, 400);
    const unsettled = verdict.unresolved.map((p) => p.join(' vs ')).join(', ') || 'none';
    this.host.deps.log(`job ${this.host.jobId}: round ${r.roundId}: digests settled by recomputation: ${evidence}; lied: ${verdict.liars.join(', ') || 'nobody shown'}; unsettled: ${unsettled}`);
    const sitters = [...new Set(verdict.unresolved.flat())].filter((id) => !verdict.liars.includes(id));
    if (sitters.length) {
      this.host.deps.count('accusations_unsettled');
      this.host.sitOut(sitters, `round ${r.roundId}: an accusation between ${verdict.unresolved.map((p) => p.join(' and ')).join(', ')} that recomputation could not settle`);
    }
    this.host.reject(r, verdict.liars, `the group's digests disagree (${evidence})`, `what it reported disagrees with its group (${evidence})`);
  }

  /** The server recomputes each disputed part from the evidence: whoever reported another aggregate lied. */
  private settleDisputes(r: ActiveRound): void {
    const liars = new Set<string>();
    const findings: string[] = [];
    let ownerLied = false;
    for (const d of r.disputes!.values()) {
      const weights = r.steps ? cappedWeights(r.members.map((id) => r.steps![id])) : undefined;
      const verdict = settleDispute(d, r.members.map((id) => d.evidence.get(id)!), this.host.spec, weights);
      for (const id of verdict.liars) liars.add(id);
      if (verdict.liars.includes(d.owner)) ownerLied = true;
      const claims = `owner ${d.owner} reported ${d.ownerAggregate}, validator ${d.validator} ${d.validatorAggregate || '(all refused)'}`;
      findings.push(`part ${d.part} recomputed from every member's contribution is ${verdict.truth}; ${claims}`);
    }
    const evidence = findings.join('; ');
    this.host.deps.log(`job ${this.host.jobId}: round ${r.roundId}: ${evidence}; lied: ${[...liars].join(', ')}`);
    // A lying validator changed nothing: the round stands, and it goes after the commit. A lying owner's part is wrong everywhere.
    if (!ownerLied) {
      for (const member of liars) r.removeAtCommit.push({ member, reason: `round ${r.roundId}: validated a part falsely (${evidence.slice(0, 300)})` });
      return this.host.commit(r);
    }
    this.host.reject(r, [...liars], `an owner sent a wrong aggregate (${evidence.slice(0, 400)})`);
  }

  /**
   * Cross-checks a group round's digests (group-check.ts). On a mismatch the members may hold
   * different models: the round is aborted, nothing is applied, the blamed members are removed, and
   * null is returned. Otherwise returns the members whose contributions most owners refused (the
   * commit removes them; their values were already left out).
   */
  private agrees(r: ActiveRound): GroupVerdict['refused'] | null {
    const reports = new Map([...r.results].map(([id, x]) => [id, x.group!]));
    const verdict = checkGroup(r.members, reports);
    for (const x of verdict.refused) {
      this.host.deps.count('contributions_refused');
      const refusals = `refused by ${x.reasons.length} of ${r.members.length} owners: ${x.reasons.join('; ').slice(0, 500)}`;
      this.host.deps.log(`job ${this.host.jobId}: round ${r.roundId}: ${x.member}'s contributions were ${refusals}`);
    }
    if (verdict.mismatches.length === 0) return verdict.refused;
    this.host.deps.count('digest_mismatches');
    const evidence = verdict.mismatches.map((x) => `${x.kind} ${x.from}→${x.to} (part ${x.part})`).join(', ');
    // Counting who is in the most pairs let two colluders frame one honest member: the server
    // recomputes the disputed parts from every member's evidence instead (digest-disputes.ts).
    const disputes = disputedParts(r.members, verdict.mismatches, (owner) => r.results.get(owner)!.group!.digests.aggregate);
    this.host.deps.log(`job ${this.host.jobId}: round ${r.roundId}: digests disagree: ${evidence}; asking every member for its contribution to part(s) ${disputes.map((d) => d.part).join(', ')}`);
    r.disputes = new Map(disputes.map((d) => [d.part, { ...d, validator: '', validatorAggregate: '', evidence: new Map() }]));
    for (const d of disputes) this.host.deps.toVolunteer(r.members, 'evidence:request', { jobId: this.host.jobId, roundId: r.roundId, part: d.part });
    return null;
  }
}
