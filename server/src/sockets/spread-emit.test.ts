import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import type { VolunteerConnection } from './connection';
import { SPREAD_PER_TICK, SPREAD_TICK_MS, SpreadEmit } from './spread-emit';

/** A connection that records what it was sent, and when. */
function connection(clock: FakeClock, sent: { id: number; event: string; payload: unknown; at: number }[], id: number) {
  const c = {
    open: true,
    get conn() {
      return { readyState: c.open ? 'open' : 'closed' };
    },
    emit: (event: string, payload: unknown) => sent.push({ id, event, payload, at: clock.now() }),
  };
  return c;
}

describe('SpreadEmit', () => {
  it('sends to every connection once, a slice per tick, the first slice at once, and skips those closed meanwhile', async () => {
    const clock = new FakeClock();
    const sent: { id: number; event: string; payload: unknown; at: number }[] = [];
    const conns = Array.from({ length: 2 * SPREAD_PER_TICK + 7 }, (_, i) => connection(clock, sent, i));
    const spread = new SpreadEmit(clock);
    spread.start(conns as unknown as VolunteerConnection[], 'heartbeat', { ms: 16_000 });
    assert.equal(sent.length, SPREAD_PER_TICK, 'the first slice goes at once');
    conns[conns.length - 1].open = false;
    await clock.advance(SPREAD_TICK_MS);
    assert.equal(sent.length, 2 * SPREAD_PER_TICK);
    await clock.advance(SPREAD_TICK_MS);
    assert.equal(sent.length, 2 * SPREAD_PER_TICK + 6, 'the connection that closed is passed over');
    assert.equal(spread.sending, false);
    await clock.advance(10 * SPREAD_TICK_MS);
    assert.equal(sent.length, 2 * SPREAD_PER_TICK + 6, 'and nothing is sent twice');
    assert.deepEqual(new Set(sent.map((s) => s.id)).size, sent.length);
    assert.ok(sent.every((s) => s.event === 'heartbeat' && (s.payload as { ms: number }).ms === 16_000));
  });

  it('a newer event replaces one still being sent: the rest get only the newer', async () => {
    const clock = new FakeClock();
    const sent: { id: number; event: string; payload: unknown; at: number }[] = [];
    const conns = Array.from({ length: 3 * SPREAD_PER_TICK }, (_, i) => connection(clock, sent, i)) as unknown as VolunteerConnection[];
    const spread = new SpreadEmit(clock);
    spread.start(conns, 'heartbeat', { ms: 8_000 });
    spread.start(conns, 'heartbeat', { ms: 16_000 });
    for (let i = 0; i < 5; i++) await clock.advance(SPREAD_TICK_MS);
    const ms = (p: unknown) => (p as { ms: number }).ms;
    assert.equal(sent.filter((s) => ms(s.payload) === 8_000).length, SPREAD_PER_TICK, 'the older went out to its first slice only');
    assert.equal(sent.filter((s) => ms(s.payload) === 16_000).length, conns.length, 'the newer to everyone');
  });

  it('stops when told', async () => {
    const clock = new FakeClock();
    const sent: { id: number; event: string; payload: unknown; at: number }[] = [];
    const spread = new SpreadEmit(clock);
    spread.start(Array.from({ length: 2 * SPREAD_PER_TICK }, (_, i) => connection(clock, sent, i)) as unknown as VolunteerConnection[], 'heartbeat', { ms: 1 });
    spread.stop();
    await clock.advance(10 * SPREAD_TICK_MS);
    assert.equal(sent.length, SPREAD_PER_TICK);
  });
});
