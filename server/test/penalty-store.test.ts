// Both stores keep a job's penalty records (coordinator/penalties.ts) the same way: SQLite, and Redis
// (a real redis-server started here), through the same Store calls. Of two writes of one record the
// newer (more offences, then a later keep-out) stays, whichever lands last.
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createClient } from 'redis';
import { RedisStore } from '../src/store/redis';
import { SqliteStore } from '../src/store/sqlite';
import type { PenaltyRecord, Store } from '../src/store/store';
import { startRedisServer } from '../src/testing/redis-server';

let redis: Awaited<ReturnType<typeof startRedisServer>>;
let redisClient: ReturnType<typeof createClient>;
const dir = mkdtempSync(join(tmpdir(), 'tabfleet-penalties-'));
const stores: Store[] = [];

before(async () => {
  redis = await startRedisServer();
  redisClient = createClient({ url: redis.url });
  await redisClient.connect();
  stores.push(new SqliteStore(join(dir, 'a')), new RedisStore(redisClient));
});
after(async () => {
  for (const s of stores) await s.close();
  await redisClient?.quit();
  redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const byKey = (records: PenaltyRecord[]) => [...records].sort((a, b) => `${a.kind}:${a.key}`.localeCompare(`${b.kind}:${b.key}`));

for (const kind of ['sqlite', 'redis'] as const) {
  test(`${kind}: penalty records round-trip per job; a stale write never undoes a newer one`, async () => {
    const store = stores.find((s) => s.kind === kind)!;
    assert.deepEqual(await store.penalties('job-p'), []);
    const first: PenaltyRecord[] = [
      { kind: 'identity', key: 'liar-1', offences: 1, until: 1_700_000_010_000, reason: 'loaded a model with checksum x' },
      { kind: 'network', key: '2001:db8::/48', offences: 1, until: 0, reason: 'loaded a model with checksum x' },
      { kind: 'newcomers', key: '2001:db8::/48', offences: 0, until: 1_700_000_010_000, reason: 'loaded a model with checksum x' },
    ];
    await store.savePenalties('job-p', first);
    await store.savePenalties('job-p', [{ kind: 'departure', key: 'liar-1', offences: 2, until: 0, reason: 'left during a round' }]);
    await store.savePenalties('job-q', [{ kind: 'identity', key: 'liar-1', offences: 5, until: 9, reason: 'another job' }]);
    await store.savePenalties('job-p', []);
    const expected = [...first, { kind: 'departure', key: 'liar-1', offences: 2, until: 0, reason: 'left during a round' } as PenaltyRecord];
    assert.deepEqual(byKey(await store.penalties('job-p')), byKey(expected), 'kinds and jobs apart; keys with colons intact');

    // The next fault replaces the record; a late write of an older version (a node that lost the job) does not.
    const newer: PenaltyRecord = { kind: 'network', key: '2001:db8::/48', offences: 3, until: 1_700_000_030_000, reason: 'third lie' };
    await store.savePenalties('job-p', [newer]);
    await store.savePenalties('job-p', [{ ...first[1], offences: 2, reason: 'stale' }, { ...first[2], until: 1_700_000_005_000, reason: 'stale' }]);
    const later: PenaltyRecord = { ...first[0], until: 1_700_000_020_000, reason: 'same count, later keep-out' };
    await store.savePenalties('job-p', [later]);
    assert.deepEqual(byKey(await store.penalties('job-p')), byKey([later, newer, first[2], expected[3]]));
    assert.deepEqual(await store.penalties('job-q'), [{ kind: 'identity', key: 'liar-1', offences: 5, until: 9, reason: 'another job' }]);

    const digest = await store.digest();
    await store.savePenalties('job-q', [{ kind: 'identity', key: 'liar-2', offences: 1, until: 1, reason: 'r' }]);
    assert.notEqual(await store.digest(), digest, 'the digest covers penalties');
  });
}

test('sqlite: a data directory from before penalties were stored gets the table when it opens', async () => {
  const old = join(dir, 'old');
  await new SqliteStore(old).close();
  const db = new Database(join(old, 'tabfleet.sqlite'));
  db.exec('DROP TABLE penalties');
  db.close();
  const store = new SqliteStore(old);
  try {
    assert.deepEqual(await store.penalties('job-p'), []);
    await store.savePenalties('job-p', [{ kind: 'identity', key: 'a', offences: 1, until: 2, reason: 'r' }]);
    assert.deepEqual(await store.penalties('job-p'), [{ kind: 'identity', key: 'a', offences: 1, until: 2, reason: 'r' }]);
  } finally {
    await store.close();
  }
});
