// A network lab with the real server: homes behind endpoint-independent NATs (tbf-capped uplinks),
// each with volunteer hosts, and the server (and a STUN server, coturn in --stun-only mode) in a
// public host. Jobs run with Node volunteers (packages/worker/src/testing/volunteer-main.ts: the
// worker runtime on the CPU backend, WebRTC through @roamhq/wrtc) as processes inside the hosts, and
// each home's router counts the UDP bytes (the peer links: WebRTC data channels) leaving through its
// WAN. The hierarchical and auto-tuner parts of the internet benchmark share it.
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { NetLab, type Home, type LabHost } from '@tabfleet/netlab';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'volunteer-lab-bench-token-0123456789';
const SERVER_PORT = 8080;
const STUN_PORT = 3478;
/** The lab's own nftables table in each home router: UDP bytes leaving through the WAN (after NAT). */
const METER = 'table ip hiermeter {\n  counter up {}\n  chain out {\n    type filter hook postrouting priority 300; policy accept;\n'
  + '    oifname "wan" meta l4proto udp counter name up\n  }\n}\n';

export interface VolunteerLabOptions {
  /** Home names; each gets hosts `${home}1` … `${home}${perHome}`. */
  homes: string[];
  perHome: number;
  /** Cap on each home's uplink, Mbit/s (0: none). */
  uplinkMbit: number;
  log: (line: string) => void;
}

export interface RoundRow {
  seq: number;
  mode: string;
  outcome: string;
  members: string[];
  /** Begin to commit (or abort), ms; null while open. */
  ms: number | null;
}

/** A job's summary as GET /api/jobs/:id gives it (the fields the benchmark reads). */
export interface JobView {
  state: string;
  seq: number;
  /** Members of the job now. */
  workers?: number;
  syncTime?: {
    nextPredictedMs: number | null;
    last: { predictedMs: number; actualMs: number } | null;
    medianError: number | null;
    auto?: { H: number; dtype: string; exchangeMs: { f32: number | null; f16: number | null } } | null;
  };
}

export interface JobRun {
  jobId: string;
  rounds: RoundRow[];
  /** Each home's UDP bytes out through its WAN during the job. */
  uplinkBytes: Record<string, number>;
  /** Each volunteer (by host name, a1, b1, …): its id, home and what its collectives sent (frames, LAN links included). */
  volunteers: Record<string, { volunteerId: string | null; home: string; bytesSent: number }>;
  /** The job's summary when it was done (or `until` held). */
  final: JobView;
}

export interface VolunteerLab {
  describe(): { server: string; stun: string; homes: { name: string; nat: 'eim'; uplinkMbit: number | null; hosts: string[] }[] };
  /**
   * Creates the job `spec` and starts a volunteer on each host of `order`, one at a time (each is a
   * member before the next starts), until the job is done or `until` holds for its summary, which
   * `until` sees about every 100 ms meanwhile (with the job's id). The volunteers are stopped then.
   */
  runJob(spec: Record<string, unknown>, order: string[], until?: (job: JobView, jobId: string) => boolean | Promise<boolean>): Promise<JobRun>;
  /** A GET of the server's HTTP API (with the lab's token), through the portal. */
  api(path: string): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

interface Volunteer {
  child: ChildProcess;
  name: string;
  home: string;
  status: { volunteerId: string | null; jobId: string | null; state: string; bytesSent: number } | null;
  lines: string[];
}

export async function openVolunteerLab(opts: VolunteerLabOptions): Promise<VolunteerLab> {
  const lab = await NetLab.create({ prefix: 'tfh' });
  const dataDir = await mkdtemp(join(tmpdir(), 'tabfleet-volunteer-lab-'));
  const close = async () => {
    await lab.close();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const pub = await lab.publicHost('srv');
    const homes: Home[] = [];
    const hosts = new Map<string, LabHost>();
    for (const name of opts.homes) {
      const home = await lab.home(name, { nat: 'eim', ...(opts.uplinkMbit ? { uplinkMbit: opts.uplinkMbit } : {}) });
      homes.push(home);
      for (let i = 1; i <= opts.perHome; i++) hosts.set(`${name}${i}`, await home.host(`t${i}`));
      await lab.exec(home, ['nft', '-f', '-'], { input: METER });
    }
    drain(lab.spawn(pub, ['turnserver', '-n', `--listening-ip=${pub.address}`, `--listening-port=${STUN_PORT}`, '--stun-only', '--no-cli', '--no-tls', '--no-dtls',
      '--log-file=stdout', '--simple-log', `--pidfile=${join(dataDir, 'turnserver.pid')}`, `--userdb=${join(dataDir, 'turndb')}`]), []);
    const serverLines: string[] = [];
    const url = `http://${pub.address}:${SERVER_PORT}`;
    drain(lab.spawn(pub, [process.execPath, '--import', 'tsx', 'server/src/main.ts', '--host', pub.address, '--port', String(SERVER_PORT), '--data', dataDir,
      '--public-url', url, '--stun', `stun:${pub.address}:${STUN_PORT}`], { cwd: ROOT, env: { ...process.env, TABFLEET_TOKEN: TOKEN } }), serverLines);
    const portal = await lab.portal(pub, pub.address, SERVER_PORT);
    const api = apiAt(`http://127.0.0.1:${portal.port}`);
    await waitFor('the server answers', async () => (await api('/api/jobs').catch(() => null))?.status === 200, 120_000, () => serverLines.slice(-20).join('\n'));
    opts.log(`volunteer lab: server ${url}, homes ${opts.homes.join(', ')} of ${opts.perHome} hosts, uplinks ${opts.uplinkMbit ? `${opts.uplinkMbit} Mbit/s` : 'uncapped'}`);

    const runJob = async (spec: Record<string, unknown>, order: string[], until?: (job: JobView, jobId: string) => boolean | Promise<boolean>): Promise<JobRun> => {
      const created = await api('/api/jobs', spec);
      if (created.status !== 201) throw new Error(`creating the job: ${created.status} ${JSON.stringify(created.body)}`);
      const jobId = created.body.job.id as string;
      const before = await Promise.all(homes.map((h) => uplinkUdpBytes(lab, h)));
      const volunteers: Volunteer[] = [];
      const seen: { final: JobView | null; ended: boolean } = { final: null, ended: false };
      try {
        for (const name of order) {
          const host = hosts.get(name);
          if (!host) throw new Error(`no volunteer host ${name} in this lab (${[...hosts.keys()].join(', ')})`);
          const v = startVolunteer(lab, host, name, url, jobId);
          volunteers.push(v);
          await waitFor(`${name} joins job ${jobId}`, async () => v.status?.jobId === jobId, 180_000, () => v.lines.slice(-20).join('\n'));
        }
        const done = async () => {
          const job = (await api(`/api/jobs/${jobId}`)).body.job as JobView;
          seen.ended = job.state === 'done' || job.state === 'failed' || job.state === 'stopped';
          if (seen.ended || (await until?.(job, jobId))) seen.final = job;
          return seen.final !== null;
        };
        await waitFor(`job ${jobId} is done${until ? ' or has run its syncs' : ''}`, done, 15 * 60_000,
          () => `${serverLines.slice(-30).join('\n')}\n${volunteers.map((v) => `${v.name}: ${v.lines.slice(-8).join('\n')}`).join('\n')}`, 100);
      } finally {
        await Promise.all(volunteers.map((v) => stopChild(v.child)));
      }
      if (seen.ended && seen.final!.state !== 'done') throw new Error(`job ${jobId} ended ${seen.final!.state}: ${JSON.stringify(seen.final)}\n${serverLines.slice(-30).join('\n')}`);
      const after = await Promise.all(homes.map((h) => uplinkUdpBytes(lab, h)));
      const rounds = ((await api(`/api/jobs/${jobId}/rounds`)).body.rounds as { seq: number; mode: string; outcome: string; members: string[]; startedAt: number; endedAt: number | null }[])
        .map((r) => ({ seq: r.seq, mode: r.mode, outcome: r.outcome, members: r.members, ms: r.endedAt === null ? null : r.endedAt - r.startedAt }));
      return {
        jobId, rounds, final: seen.final!,
        uplinkBytes: Object.fromEntries(homes.map((h, i) => [h.name, after[i] - before[i]])),
        volunteers: Object.fromEntries(volunteers.map((v) => [v.name, { volunteerId: v.status?.volunteerId ?? null, home: v.home, bytesSent: v.status?.bytesSent ?? 0 }])),
      };
    };
    return {
      describe: () => ({
        server: `${url} (server/src/main.ts in the public host)`, stun: `stun:${pub.address}:${STUN_PORT} (coturn --stun-only)`,
        homes: homes.map((h) => ({ name: h.name, nat: 'eim' as const, uplinkMbit: opts.uplinkMbit || null, hosts: [...hosts.keys()].filter((k) => k.startsWith(h.name)) })),
      }),
      runJob,
      api: (path) => api(path),
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

function startVolunteer(lab: NetLab, host: LabHost, name: string, url: string, jobId: string): Volunteer {
  const child = lab.spawn(host, [process.execPath, '--import', 'tsx', 'packages/worker/src/testing/volunteer-main.ts', url, jobId], { cwd: ROOT });
  const v: Volunteer = { child, name, home: name.replace(/\d+$/, ''), status: null, lines: [] };
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      const parsed = JSON.parse(line) as { status?: Volunteer['status']; log?: string };
      if (parsed.status) v.status = parsed.status;
      if (parsed.log) keep(v.lines, parsed.log);
    } catch {
      keep(v.lines, line);
    }
  });
  drain(child, v.lines, 'stderr');
  return v;
}

/** The UDP bytes a home's router sent out through its WAN so far. */
async function uplinkUdpBytes(lab: NetLab, home: Home): Promise<number> {
  const { stdout } = await lab.exec(home, ['nft', '-j', 'list', 'counter', 'ip', 'hiermeter', 'up']);
  const entry = (JSON.parse(stdout) as { nftables: { counter?: { bytes: number } }[] }).nftables.find((e) => e.counter);
  if (!entry) throw new Error(`no UDP meter in ${home.ns}`);
  return entry.counter!.bytes;
}

function apiAt(base: string) {
  return async (path: string, json?: unknown): Promise<{ status: number; body: any }> => {
    const res = await fetch(`${base}${path}`, {
      method: json === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: json === undefined ? undefined : JSON.stringify(json),
      // A request that never gets an answer must not hold up a wait that retries it.
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    return { status: res.status, body };
  };
}

function keep(lines: string[], line: string): void {
  lines.push(line);
  if (lines.length > 400) lines.splice(0, 200);
}

/** Reads a child's output (a chatty one would stall on a full pipe), keeping its last lines. */
function drain(child: ChildProcess, lines: string[], which: 'both' | 'stderr' = 'both'): void {
  for (const stream of which === 'both' ? [child.stdout, child.stderr] : [child.stderr]) {
    if (stream) createInterface({ input: stream }).on('line', (l) => keep(lines, l));
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, 5_000)))]);
  clearTimeout(timer);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, context: () => string, everyMs = 250): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
