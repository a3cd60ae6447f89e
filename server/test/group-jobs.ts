// Helpers of the group-round tests (untrusted jobs through the real server with simulated volunteers).
import { after, afterEach, before } from 'node:test';
import type { SimOptions, SimVolunteer } from '../src/testing/sim-volunteer';
import type { ServerOptions } from '../src/app';
import { startTestServer, type TestServer } from '../src/testing/test-server';

/** A test server for this file's tests (10 s round, barrier and load timeouts, then `opts`), with no job left running between tests. */
export function testServerPerFile(opts: ServerOptions = {}): () => TestServer {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 }, ...opts });
  });
  after(() => server.stop());
  afterEach(() => server.stopJobs());
  return () => server;
}

export type Round = { roundId: number; seq: number; mode: string; outcome: string; detail: string; members: string[] };

export function groupJobs(server: () => TestServer) {
  return {
    roundsOf: async (id: string): Promise<Round[]> => (await server().api(`/api/jobs/${id}/rounds`)).body.rounds,
    /** Starts a job of `honest` honest members and one member with `attacker`'s options; all request it. */
    async jobWith(attacker: Partial<SimOptions>, honest = 3, spec: object = {}) {
      const created = await server().createJob({ minWorkers: 2, maxWorkers: honest + 1, H: 1, targetSteps: 1000, ...spec });
      const sims = [...(await Promise.all(Array.from({ length: honest }, () => server().volunteer()))), await server().volunteer(attacker)];
      for (const s of sims) await s.request(created.id);
      return { id: created.id, honest: sims.slice(0, honest), attacker: sims[honest] };
    },
  };
}

export const endReason = (s: SimVolunteer) => (s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined)?.reason;

/** Whether every sim applied the same parameters at sync `seq`. */
export function sameParameters(sims: SimVolunteer[], seq: number): boolean {
  const [first, ...rest] = sims.map((s) => s.applied.get(seq));
  return !!first && rest.every((p) => p && p.length === first.length && p.every((v, i) => Object.is(v, first[i])));
}
