// `npm start`: the whole system on one machine. Builds the pages, starts the server (SQLite under
// ./data), creates the default Fashion-MNIST job when no job is unfinished, launches headless
// Chromium volunteers (and with --turn local a coturn for their relays), prints the dashboard and
// volunteer URLs and the job's progress, and shuts everything down on Ctrl-C.
import { targetStepsOf, type JobSpecInput, type JobSummary, type MetricPoint } from '@tabfleet/protocol';
import { parseArgs } from 'node:util';
import { startServer } from '@tabfleet/server';
import { ensureBuilt, formatStatus, launchWorkers, type HeadlessWorkers } from '@tabfleet/headless';
import { startLocalCoturn, type LocalCoturn } from './local-coturn';

const HELP = `Usage: npm start -- [options]

Runs tabfleet locally: the server (SQLite under --data), the default Fashion-MNIST job (created when
no job is unfinished), and --workers headless Chromium volunteers training it on WebGPU (SwiftShader
without a GPU). Open the printed dashboard URL to watch, or the volunteer URL in another browser to
join in.

Options:
  --port N        HTTP port (default 8080; 0 picks a free one)
  --data DIR      SQLite file and checkpoints (default ./data)
  --workers N     headless volunteers to launch (default 2; 0 for none)
  --redis URL     share state with other server nodes through Redis (default $REDIS_URL)
  --turn local    also start Debian's coturn on 127.0.0.1 (STUN and TURN, a secret made for this run)
                  and hand volunteers its relay with their own credentials; stopped with the rest
  --help          show this help`;

/** The job `npm start` trains when there is nothing else to do. */
export const DEFAULT_JOB: JobSpecInput = {
  name: 'Fashion-MNIST MLP (LocalSGD)', preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8,
  hyperparameters: { lr: 0.05, batchSize: 32, momentum: 0.9 }, minWorkers: 1, maxWorkers: 4, targetSteps: 800, targetAccuracy: 0.86,
  // Evaluated every 5 syncs as before checkpoints off the schedule became checksum-only: the console
  // shows the accuracy that often, and the target is seen within 40 steps.
  checkpointEvery: 5, evalEverySteps: 40,
};

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8080' }, data: { type: 'string', default: 'data' }, workers: { type: 'string', default: '2' },
    redis: { type: 'string' }, turn: { type: 'string' }, help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const port = Number(values.port), workerCount = Number(values.workers);
if (!Number.isInteger(port) || port < 0 || port > 65535 || !Number.isInteger(workerCount) || workerCount < 0 || workerCount > 16) {
  console.error(`--port must be 0..65535 and --workers 0..16\n\n${HELP}`);
  process.exit(2);
}

if (values.turn !== undefined && values.turn !== 'local') {
  console.error(`--turn ${values.turn}: want 'local' (a coturn on this machine); for a TURN server elsewhere run server/src/main.ts --turn URL\n\n${HELP}`);
  process.exit(2);
}

// Ctrl-C while starting: exit at once; 'exit' handlers (the local coturn's) still run, which a death by signal would skip.
const quitWhileStarting = () => process.exit(130);
process.on('SIGINT', quitWhileStarting);
process.on('SIGTERM', quitWhileStarting);

await ensureBuilt('apps', console.log);
let coturn: LocalCoturn | null = null;
if (values.turn === 'local') {
  coturn = await startLocalCoturn((l) => console.log(`[coturn] ${l}`));
  console.log(`[coturn] STUN and TURN on 127.0.0.1:${coturn.port} (pid ${coturn.pid})`);
}
// It listens on 127.0.0.1 only and its workers are this machine's own: no per-address share of a job.
const server = await startServer({
  port, dataDir: values.data, redisUrl: values.redis ?? process.env.REDIS_URL, addressLimits: { connections: 32 + workerCount, jobShare: 1 },
  networkRules: false, log: (l) => console.log(`[server] ${l}`),
  ice: coturn ? { stun: [coturn.stun], turn: [coturn.turn], turnSecret: coturn.secret } : undefined,
}).catch(async (e: unknown) => {
  await coturn?.stop();
  if ((e as Error).name !== 'WeakTokenError') throw e;
  console.error((e as Error).message);
  process.exit(2);
});
const auth = { authorization: `Bearer ${server.secrets.token}`, 'content-type': 'application/json' };
const jobs = (await (await fetch(`${server.url}/api/jobs`, { headers: auth })).json()).jobs as JobSummary[];
let job = jobs.find((j) => j.state === 'waiting' || j.state === 'running');
if (!job) {
  const res = await fetch(`${server.url}/api/jobs`, { method: 'POST', headers: auth, body: JSON.stringify(DEFAULT_JOB) });
  job = (await res.json()).job as JobSummary;
  console.log(`created the default job ${job.id}: ${job.name}`);
} else console.log(`continuing job ${job.id}: ${job.name} (sync ${job.seq}, step ${job.step})`);

// The token rides in the fragment (never sent to the server); the page removes it from the address bar.
console.log(`
  dashboard sign-in:  ${server.url}/apps/dashboard/#token=${encodeURIComponent(server.secrets.token)}
  volunteer:  ${server.url}/apps/volunteer/${server.secrets.generated ? '\n  (researcher token generated now, stored in the data directory)' : ''}
`);

let workers: HeadlessWorkers | null = null;
if (workerCount > 0) workers = await launchWorkers({ serverUrl: server.url, count: workerCount, log: console.log });

const jobId = job.id;
let lastLine = '';
const progress = setInterval(async () => {
  try {
    const { job: j } = await (await fetch(`${server.url}/api/jobs/${jobId}`, { headers: auth })).json();
    const points = ((await (await fetch(`${server.url}/api/jobs/${jobId}/metrics`, { headers: auth })).json()).points ?? []) as MetricPoint[];
    const acc = points.filter((p) => p.accuracy !== null).at(-1)?.accuracy;
    const loss = points.filter((p) => p.loss !== null).at(-1)?.loss;
    const line = `job ${jobId}: ${j.state}  step ${j.step}/${targetStepsOf(j.spec)}  sync ${j.seq}  workers ${j.workers}`
      + `${loss != null ? `  loss ${loss.toFixed(3)}` : ''}${acc != null ? `  test accuracy ${(100 * acc).toFixed(2)}%` : ''}${j.endReason ? `  (${j.endReason})` : ''}`;
    // Once the job has ended the line stops changing: say it once, with what to do next.
    const ended = j.state === 'done' || j.state === 'stopped' || j.state === 'failed';
    if (line !== lastLine) console.log(ended ? `${line}\n  the dashboard stays up; Ctrl-C stops the server and the volunteer tabs` : line);
    lastLine = line;
    if (process.env.TABFLEET_VERBOSE && workers) (await workers.statuses()).forEach((s, i) => console.log(`  ${formatStatus(i, s)}`));
  } catch (e) {
    console.log(`progress: ${(e as Error).message}`);
  }
}, 5_000);

let stopping = false;
async function shutdown(): Promise<void> {
  if (stopping) process.exit(1);
  stopping = true;
  clearInterval(progress);
  console.log('\nstopping: closing the volunteer tabs, then the server…');
  await workers?.stop();
  await server.close();
  await coturn?.stop();
  process.exit(0);
}
process.off('SIGINT', quitWhileStarting);
process.off('SIGTERM', quitWhileStarting);
process.on('SIGINT', () => void shutdown());
process.on('SIGTERM', () => void shutdown());
