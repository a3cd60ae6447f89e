// Pause while a unit of local steps is being computed, against the real server: the unit the engine
// was running is dropped (no round:ready), and the volunteer stays paused, saying so, rather than
// going on to "syncing" with the steps of work it will never send. The volunteer page's and the
// contribute widget's Pause button both come here.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setImmediate as nextMacrotask } from 'node:timers/promises';
import { MemoryNetwork } from '@tabfleet/collective';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

test('a pause during a unit of local steps drops that unit and leaves the volunteer paused', { timeout: 120_000 }, async () => {
  const job = await server.createJob({
    trust: 'trusted', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 4, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 1, maxWorkers: 1, targetSteps: 1_000_000, evalEverySteps: 1_000_000,
  });
  const v = nodeVolunteer(server.url, new MemoryNetwork(), { jobId: job.id });
  try {
    const ready: number[] = [];
    const emit = v.socket.emit.bind(v.socket);
    v.socket.emit = ((event: string, ...args: unknown[]) => {
      if (event === 'round:ready') ready.push((args[0] as { seq: number }).seq);
      return emit(event, ...args);
    }) as typeof v.socket.emit;
    await waitFor('the volunteer commits two syncs', async () => v.runtime.status.syncs >= 2, 60_000, 50);

    // The next unit pauses the volunteer as soon as it starts, and says when its steps are done.
    let unitDone!: () => void;
    const finished = new Promise<void>((r) => (unitDone = r));
    const local = v.engine.local.bind(v.engine);
    const currentStep = v.engine.currentStep.bind(v.engine);
    let stepAtPause = -1;
    let readyAtPause = -1;
    v.engine.local = async (...args: Parameters<typeof local>) => {
      v.engine.local = local;
      stepAtPause = v.runtime.status.step;
      readyAtPause = ready.length;
      await v.runtime.pause();
      return local(...args);
    };
    v.engine.currentStep = () => {
      const step = currentStep();
      if (stepAtPause >= 0) unitDone();
      return step;
    };
    await finished;
    await nextMacrotask(); // the runtime's continuation after the unit has run
    assert.ok(stepAtPause >= 0, 'a unit started');
    assert.equal(v.runtime.status.state, 'paused');
    assert.deepEqual(v.runtime.status.held, ['paused']);
    assert.equal(v.runtime.status.step, stepAtPause, 'the dropped unit is not shown as steps done');
    assert.equal(ready.length, readyAtPause, 'no round:ready for the dropped unit');
    assert.equal(v.runtime.status.lastError, null);
  } finally {
    v.runtime.stop();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
