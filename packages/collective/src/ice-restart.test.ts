// IceWatch's schedule on fake time: a restart as soon as ICE goes down and again every retryMs while
// it stays down; back up, nothing more is tried and the bound is off; still down at the bound, the link
// is given up once, the reason counting this outage's restarts; the other side's requests are throttled.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import { IceWatch } from './ice-restart';

function watch() {
  const clock = new FakeClock();
  const log: string[] = [];
  const w = new IceWatch({ clock, boundMs: 10_000, retryMs: 3_000, restart: () => log.push(`restart@${clock.now() - 1_000_000}`), giveUp: (r) => log.push(`gave up: ${r}`) });
  return { clock, log, w };
}

test('a link that comes back is restarted while down and never given up', async () => {
  const { clock, log, w } = watch();
  w.state('connected');
  assert.deepEqual(log, []);
  w.state('disconnected');
  assert.ok(w.down);
  await clock.advance(1_000);
  w.state('checking'); // the restart's checks: still down
  w.state('failed');
  await clock.advance(5_500);
  assert.deepEqual(log, ['restart@0', 'restart@3000', 'restart@6000']);
  w.state('connected');
  assert.equal(w.down, false);
  await clock.advance(60_000);
  assert.deepEqual(log, ['restart@0', 'restart@3000', 'restart@6000'], 'nothing after it came back');
  assert.deepEqual([w.restarts, w.recoveries], [3, 1]);
});

test('a link still down at the bound is given up once, naming this outage\'s restarts', async () => {
  const { clock, log, w } = watch();
  w.state('disconnected');
  await clock.advance(2_000);
  w.state('connected');
  await clock.advance(1_000);
  w.state('disconnected'); // a second outage: its own bound and count
  await clock.advance(9_999);
  assert.ok(!log.some((l) => l.startsWith('gave up')));
  await clock.advance(1);
  assert.deepEqual(log.filter((l) => l.startsWith('gave up')), ['gave up: ICE disconnected for 10000 ms; 4 ICE restart(s) did not bring it back']);
  await clock.advance(60_000);
  assert.equal(log.filter((l) => l.startsWith('gave up')).length, 1);
  assert.equal(log.filter((l) => l.startsWith('restart')).length, 5, 'none after giving up');
});

test("the other side's requests restart at most once per retry interval", async () => {
  const { clock, log, w } = watch();
  w.requested();
  w.requested();
  await clock.advance(2_999);
  w.requested();
  await clock.advance(1);
  w.requested();
  assert.deepEqual(log, ['restart@0', 'restart@3000']);
  assert.equal(w.down, false, 'requests alone do not mark this side down');
});
