// Issue 37's adaptive owner (server/src/testing/adaptive-owner.ts) through the real server: owners with
// standing that lie in their part's aggregate only when their group holds as many members on probation
// as there are checks (the probation-first draw then never reached them), judging probation from the
// checks their coalition saw. Against the old draw they lied round after round unseen; the server now
// draws every part at VALIDATED_PART_SHARE whoever else is in the group (validation-draw.ts), so each
// lie is caught at that rate and the liar removed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PROBATION_VERIFIED, VALIDATED_PART_SHARE } from '@tabfleet/protocol';
import { AdaptiveOwner, CoalitionView } from '../src/testing/adaptive-owner';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { endReason, testServerPerFile } from './group-jobs';

const testServer = testServerPerFile();
const LIARS = 4;
const NEWCOMERS = 12;
/** Lies after which an unseen liar has made its point (0.79^40 < 1e-4 per liar with the uniform draw). */
const ENOUGH_LIES = 40;
const BEHAVED = 24;

test('owners with standing that lie only when the group\'s probationers would draw every check: each lie is caught at the validated share, and the liar removed', async () => {
  const job = await testServer().createJob({ minWorkers: NEWCOMERS, maxWorkers: LIARS + NEWCOMERS, H: 1, targetSteps: 10_000 });
  const liarIds = new Set<string>();
  const view = new CoalitionView(() => liarIds);
  const owners: AdaptiveOwner[] = [];
  const liars: SimVolunteer[] = [];
  for (let i = 0; i < LIARS; i++) {
    const clientId = `adaptive-owner-${i}-0123456789`;
    await testServer().store.addReputation(clientId, { verified: PROBATION_VERIFIED + 5 });
    const owner = new AdaptiveOwner(() => liars[i].volunteerId, view);
    owners.push(owner);
    liars.push(await testServer().volunteer({ clientId, ownerLie: owner.ownerLie, eventsKept: 4000 }));
    view.join(liars[i]);
  }
  const honest = await Promise.all(Array.from({ length: NEWCOMERS }, () => testServer().volunteer({ eventsKept: 4000 })));
  for (const s of [...liars, ...honest]) assert.equal((await s.request(job.id)).ok, true);
  for (const s of liars) liarIds.add(s.volunteerId);

  const lies = () => owners.reduce((n, o) => n + o.lies.length, 0);
  const caught = () => liars.filter((s) => endReason(s));
  const behaved = () => owners.reduce((n, o) => n + o.behaved.length, 0);
  // Until every liar is removed, the liars told ENOUGH_LIES unseen (the old draw), or the probationers
  // they counted on left probation and they behave (BEHAVED rounds, by all of them).
  await waitFor('liars removed, unseen for long enough, or behaving', () => caught().length === LIARS || lies() >= ENOUGH_LIES || behaved() >= BEHAVED, 180_000, 50);
  const rounds = (await testServer().api(`/api/jobs/${job.id}/rounds`)).body.rounds as { roundId: number; outcome: string; detail: string }[];
  const committed = new Set(rounds.filter((r) => r.outcome === 'committed').map((r) => r.roundId));
  const committedLies = owners.reduce((n, o) => n + o.lies.filter((id) => committed.has(id)).length, 0);
  console.log(`adaptive owners: ${lies()} lies told (${committedLies} applied by their group), ${behaved()} rounds behaved; ` +
    `${caught().length} of ${LIARS} liars caught`);
  const rate = caught().length / Math.max(1, lies());
  const half = 1.96 * Math.sqrt((VALIDATED_PART_SHARE * (1 - VALIDATED_PART_SHARE)) / Math.max(1, lies()));
  console.log(`caught per lie ${rate.toFixed(3)}; the validated share ${VALIDATED_PART_SHARE} ± ${half.toFixed(3)} (95%, ${lies()} lies)`);
  assert.ok(lies() >= 1, 'the liars saw rounds they believed unchecked (the group\'s probationers outnumbered the checks)');
  // Before: with the probationers' parts drawn first, 40 lies in a row and none caught.
  assert.ok(caught().length >= 1, `${lies()} lies and no liar caught`);
  for (const s of caught()) assert.match(endReason(s)!, /owner sent a wrong aggregate/);
  const caughtIn = rounds.filter((r) => r.outcome === 'aborted' && /wrong aggregate/.test(r.detail));
  for (const r of caughtIn) assert.ok(owners.some((o) => o.lies.includes(r.roundId)), `round ${r.roundId} caught a liar that did not lie in it`);
  assert.ok(honest.every((s) => !endReason(s)), 'no honest member is removed');
});
