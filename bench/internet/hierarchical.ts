// Two homes of two volunteers each behind endpoint-independent NATs in the network lab, the server
// (and a STUN server, coturn in --stun-only mode) in a public host: the same trusted ring job runs
// flat (`homeRings: false`) and by homes (the default), and the homes' routers count the UDP bytes
// (the peer links: WebRTC data channels) leaving through their WAN. Everything runs on real links:
// Node volunteers (the worker runtime on the CPU backend, WebRTC through @roamhq/wrtc) inside the
// homes' host namespaces, wall clock, nothing modeled.
//
// The volunteers join one at a time in the order a1, b1, a2, b2 (as volunteers arriving on their own
// would, homes interleaved): the flat ring follows join order, so each of its links crosses a home's
// uplink and a home sends 2 × 1.5 vectors per sync; by homes, a leader sends one (2(L − 1)/L, L = 2).
// With the homes side by side in the flat ring (a1, a2, b1, b2) it would be 1.5 against 1.
// The counts are of everything UDP the routers send out: DTLS, SCTP and IP headers, SCTP's
// acknowledgements of what the home receives, and retransmissions (measured here 1.1–1.7x the vector
// bytes alone; more under a tbf cap, which drops, and on a loaded machine).
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { NetLab, type Home, type LabHost } from '@tabfleet/netlab';
import { layoutOf } from '@tabfleet/protocol';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'hierarchical-bench-token-0123456789';
const SERVER_PORT = 8080;
const STUN_PORT = 3478;
/** The test's own nftables table in each home router: UDP bytes leaving through the WAN (after NAT). */
const METER = 'table ip hiermeter {\n  counter up {}\n  chain out {\n    type filter hook postrouting priority 300; policy accept;\n'
  + '    oifname "wan" meta l4proto udp counter name up\n  }\n}\n';

export interface HierarchicalOptions {
  /** Syncs each job runs (default 3). */
  syncs?: number;
  /** Cap on each home's uplink, Mbit/s (default 10; 0: none). */
  uplinkMbit?: number;
  log?: (line: string) => void;
}

export interface RunFigures {
  jobId: string;
  /** Committed ring rounds, and every round's mode and outcome. */
  committed: number;
  rounds: { seq: number; mode: string; outcome: string; members: string[]; ms: number | null }[];
  /** Each home's UDP bytes out through its WAN during the job, and their sum. */
  uplinkBytes: Record<string, number>;
  uplinkBytesTotal: number;
  /** What each volunteer's collectives sent (frames, all links, LAN ones included), by host (a1, b1, …). */
  frameBytesSent: Record<string, number>;
  /** Sync time: committed rounds' begin to commit, ms. */
  syncMsP50: number;
  syncMsMean: number;
  /** The volunteers' homes in the ring order of the first round. */
  ringHomes: string[];
}

export interface HierarchicalFigures {
  homes: number;
  tabsPerHome: number;
  syncs: number;
  uplinkMbit: number | null;
  /** The model's vector, bytes (fp32). */
  vectorBytes: number;
  flat: RunFigures;
  hierarchical: RunFigures;
  /** Flat ÷ hierarchical bytes over the homes' uplinks (the benchmark key `hierarchical_uplink_bytes_ratio`). */
  uplinkBytesRatio: number;
  /** Flat ÷ hierarchical median sync time. */
  syncTimeRatio: number;
}

interface Volunteer {
  child: ChildProcess;
  host: LabHost;
  home: string;
  name: string;
  status: { volunteerId: string | null; jobId: string | null; state: string; bytesSent: number } | null;
  lines: string[];
}

export async function runHierarchical(opts: HierarchicalOptions = {}): Promise<HierarchicalFigures> {
  const syncs = opts.syncs ?? 3;
  const uplinkMbit = opts.uplinkMbit ?? 10;
  const log = opts.log ?? (() => {});
  const lab = await NetLab.create({ prefix: 'tfh' });
  const dataDir = await mkdtemp(join(tmpdir(), 'tabfleet-hier-'));
  try {
    const pub = await lab.publicHost('srv');
    const homes: Home[] = [];
    for (const name of ['a', 'b']) homes.push(await lab.home(name, { nat: 'eim', ...(uplinkMbit ? { uplinkMbit } : {}) }));
    const hosts = new Map<string, LabHost>();
    for (const home of homes) {
      for (const t of ['t1', 't2']) hosts.set(`${home.name}${t.slice(1)}`, await home.host(t));
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

    const run = async (byHomes: boolean): Promise<RunFigures> => {
      const created = await api('/api/jobs', {
        preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 2, pacing: 'fixed', trust: 'trusted', homeRings: byHomes,
        hyperparameters: { lr: 0.05, batchSize: 16 }, minWorkers: 4, maxWorkers: 4, targetSteps: 2 * syncs,
      });
      if (created.status !== 201) throw new Error(`creating the job: ${created.status} ${JSON.stringify(created.body)}`);
      const jobId = created.body.job.id as string;
      const before = await Promise.all(homes.map((h) => uplinkUdpBytes(lab, h)));
      const volunteers: Volunteer[] = [];
      try {
        // One at a time, homes interleaved: each is a member (its shard, hence its place in the flat ring) before the next starts.
        for (const name of ['a1', 'b1', 'a2', 'b2']) {
          const v = startVolunteer(lab, hosts.get(name)!, name, url, jobId);
          volunteers.push(v);
          await waitFor(`${name} joins job ${jobId}`, async () => v.status?.jobId === jobId, 180_000, () => v.lines.slice(-20).join('\n'));
        }
        await waitFor(`job ${jobId} is done`, async () => (await api(`/api/jobs/${jobId}`)).body.job.state === 'done', 15 * 60_000,
          () => `${serverLines.slice(-30).join('\n')}\n${volunteers.map((v) => `${v.host.name}@${v.home}: ${v.lines.slice(-8).join('\n')}`).join('\n')}`);
      } finally {
        await Promise.all(volunteers.map((v) => stopChild(v.child)));
      }
      const after = await Promise.all(homes.map((h) => uplinkUdpBytes(lab, h)));
      const rounds = ((await api(`/api/jobs/${jobId}/rounds`)).body.rounds as { seq: number; mode: string; outcome: string; members: string[]; startedAt: number; endedAt: number | null }[])
        .map((r) => ({ seq: r.seq, mode: r.mode, outcome: r.outcome, members: r.members, ms: r.endedAt === null ? null : r.endedAt - r.startedAt }));
      const times = rounds.filter((r) => r.mode === 'ring' && r.outcome === 'committed').map((r) => r.ms!).sort((x, y) => x - y);
      const homeOf = new Map(volunteers.map((v) => [v.status?.volunteerId, v.home]));
      const uplinkBytes = Object.fromEntries(homes.map((h, i) => [h.name, after[i] - before[i]]));
      const figures: RunFigures = {
        jobId, committed: times.length, rounds, uplinkBytes, uplinkBytesTotal: Object.values(uplinkBytes).reduce((x, y) => x + y, 0),
        syncMsP50: times.length ? times[Math.floor((times.length - 1) / 2)] : NaN, syncMsMean: times.length ? times.reduce((x, y) => x + y, 0) / times.length : NaN,
        ringHomes: (rounds[0]?.members ?? []).map((id) => homeOf.get(id) ?? '?'), frameBytesSent: Object.fromEntries(volunteers.map((v) => [v.name, v.status?.bytesSent ?? 0])),
      };
      log(`${byHomes ? 'by homes' : 'flat'}: ${JSON.stringify(figures)}`);
      return figures;
    };
    const flat = await run(false);
    const hierarchical = await run(true);
    return {
      homes: 2, tabsPerHome: 2, syncs, uplinkMbit: uplinkMbit || null, vectorBytes: layoutOf('mlp-fashion').length * 4, flat, hierarchical,
      uplinkBytesRatio: flat.uplinkBytesTotal / hierarchical.uplinkBytesTotal, syncTimeRatio: flat.syncMsP50 / hierarchical.syncMsP50,
    };
  } finally {
    await lab.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

function startVolunteer(lab: NetLab, host: LabHost, name: string, url: string, jobId: string): Volunteer {
  const child = lab.spawn(host, [process.execPath, '--import', 'tsx', 'packages/worker/src/testing/volunteer-main.ts', url, jobId], { cwd: ROOT });
  const v: Volunteer = { child, host, name, home: name[0], status: null, lines: [] };
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

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, context: () => string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
