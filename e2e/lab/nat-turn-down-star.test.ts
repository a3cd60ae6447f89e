// Must show (issue 36): with TURN down (the server names a coturn that is not running) and volunteer
// tabs behind symmetric NATs, no peer link opens (reflexive candidates do not work through symmetric
// mappings, and there is no relay), so syncs fall back to star rounds through the server: they
// commit, and the dashboard says the syncs go through the server.
// On main at fd524cf this fails at the dashboard: nothing there says a round was a star round (the
// worker table showed the last round's number only); the rows now carry `lastRoundMode`.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { OpenedPage } from '@tabfleet/headless';
import { waitFor } from '@tabfleet/server/testing';
import { startLabCluster, type LabCluster } from './lab-cluster';
import { committedRounds, roundsOf, RING_JOB, tabLog } from './lab-jobs';
import { SHOTS } from '../apps-session';
import { LAB_TOKEN } from './lab-server';
import { selectedPairs } from './link-types';

const TABS = 4;
let cluster: LabCluster;
let dash: OpenedPage | undefined;
before(async () => {
  cluster = await startLabCluster({ homes: Array.from({ length: TABS }, () => ({ nat: 'symmetric' as const })), turn: 'down' });
});
after(async () => {
  await dash?.close();
  await cluster?.close();
});

test('TURN down, symmetric NATs: star rounds commit and the dashboard says the syncs go through the server', { timeout: 12 * 60_000 }, async () => {
  const { server } = cluster;
  const job = await server.createJob({ ...RING_JOB, minWorkers: TABS, maxWorkers: TABS });
  await cluster.openTabs(tabLog);
  await waitFor('two star rounds commit', async () => (await committedRounds(server, job.id, 'star')) >= 2, 8 * 60_000, 1000)
    .catch(async (e: Error) => assert.fail(`${e.message}\nrounds: ${JSON.stringify(await roundsOf(server, job.id))}\nserver log:\n${server.logTail()}`));
  const rounds = await roundsOf(server, job.id);
  assert.deepEqual(rounds.filter((r) => r.mode === 'ring' && r.outcome === 'committed'), [], 'no ring round commits: no link can open');
  for (const tab of cluster.tabs) {
    assert.deepEqual(await selectedPairs(tab.page), [], `${tab.label}: no peer link is open`);
    assert.deepEqual(tab.errors, []);
  }
  dash = await cluster.openServerPage(`/apps/dashboard/#token=${LAB_TOKEN}`, tabLog);
  await dash.page.goto(`${server.url}/apps/dashboard/#/jobs/${job.id}`);
  // The rows follow the rounds: a ring attempt that aborts leaves a member's last committed round a star one.
  await waitFor('the dashboard says the syncs go through the server', async () => {
    const note = await dash!.page.$eval('#sync-path', (e) => ((e as HTMLElement).hidden ? '' : e.textContent ?? ''));
    const cells = await dash!.page.$$eval('#workers [data-round-mode="star"]', (cs) => cs.map((c) => c.textContent ?? ''));
    return /went through the server \(a star round\)/.test(note) && cells.length === TABS && cells.every((c) => /star, through the server/.test(c));
  }, 2 * 60_000, 500).catch(async (e: Error) => assert.fail(`${e.message}\n${await dash!.page.textContent('#job-view')}`));
  mkdirSync(SHOTS, { recursive: true });
  await dash.page.screenshot({ path: join(SHOTS, 'lab-turn-down-star.png'), fullPage: true });
});
