// The internet benchmark's lab: a network lab (@tabfleet/netlab) with one public host running coturn
// (STUN, TURN over UDP and TCP, REST-API credentials) and the signaling relay, and one home per
// HomeSpec with one member process (member.ts) behind its router. Member processes answer
// commands over their stdin and stdout; ICE servers come from the server's own issuer (IceIssuer).
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { repoRoot } from '@tabfleet/headless';
import { NetLab, type LabHost } from '@tabfleet/netlab';
import { IceIssuer, startCoturn, type Coturn } from '@tabfleet/server/testing';
import { serverClock, type IceServer } from '@tabfleet/protocol';
import { ANSWER_MARK, type HomeSpec, type MemberCommand } from './config';

const TURN_PORT = 3478;
const RELAY_PORT = 7000;
/** Every home's LAN (netlab gives each a /28 of 192.0.2.0/24). */
const HOME_LANS = '192.0.2.0-192.0.2.255';
/** Lines of a member's own output kept for an error message. */
const LOG_LINES = 40;

type Answer = { ok: true } & Record<string, unknown>;
type CommandBody = MemberCommand extends infer C ? (C extends MemberCommand ? Omit<C, 'id'> : never) : never;

/** One member process in a home, driven by commands. */
export class Member {
  private nextId = 1;
  private waiting = new Map<number, { resolve: (a: Answer) => void; reject: (e: Error) => void }>();
  private readonly log: string[] = [];
  private exited: string | null = null;
  /** Why it exited (its exit code or signal), once it has. */
  get exit(): string | null {
    return this.exited;
  }
  /** Resolves once the member is registered with the signaling relay (its answer 0). */
  readonly ready: Promise<Answer>;

  constructor(readonly name: string, readonly home: HomeSpec, readonly host: LabHost, private readonly child: ChildProcess) {
    this.ready = new Promise((resolve, reject) => this.waiting.set(0, { resolve, reject }));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.startsWith(ANSWER_MARK)) return this.keep(line);
      const a = JSON.parse(line.slice(ANSWER_MARK.length)) as { id: number; ok: boolean; error?: string };
      const w = this.waiting.get(a.id);
      this.waiting.delete(a.id);
      if (!w) return;
      if (a.ok) w.resolve(a as Answer);
      else w.reject(new Error(`${name}: ${a.error}`));
    });
    createInterface({ input: child.stderr! }).on('line', (line) => this.keep(line));
    child.once('exit', (code, signal) => {
      this.exited = `member ${name} exited (${code ?? signal}); its last lines:\n${this.log.join('\n')}`;
      for (const w of this.waiting.values()) w.reject(new Error(this.exited));
      this.waiting.clear();
    });
  }

  private keep(line: string): void {
    this.log.push(line);
    if (this.log.length > LOG_LINES) this.log.shift();
  }

  /** Sends one command; resolves with its answer, rejects with the member's error. */
  send(command: CommandBody): Promise<Answer> {
    if (this.exited) return Promise.reject(new Error(this.exited));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.child.stdin!.write(`${JSON.stringify({ ...command, id })}\n`);
    });
  }

  lastLines(): string {
    return this.log.join('\n');
  }
}

export interface InternetLab {
  lab: NetLab;
  server: LabHost;
  coturn: Coturn;
  members: Map<string, Member>;
  /** The ICE servers member `name` gets: STUN and TURN (UDP, TCP) on coturn, its own credentials. */
  iceFor(name: string): IceServer[];
  /** What the JSON records about the servers (never the secret). */
  describe(): { coturn: string; stun: string; turn: string[]; relay: string; homes: Array<HomeSpec & { wan: string; host: string }> };
  /**
   * Starts member `name` again in its host after its process died (@roamhq/wrtc has crashed with SIGSEGV
   * about once in a full run); returns why the old one exited. The benchmark records it.
   */
  respawn(name: string): Promise<string>;
  close(): Promise<void>;
}

function waitForLine(child: ChildProcess, pattern: RegExp, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d;
      if (pattern.test(out)) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${what} exited with ${code}: ${out.slice(-2000)}`)));
  });
}

export async function openInternetLab(homes: HomeSpec[], log: (line: string) => void): Promise<InternetLab> {
  const lab = await NetLab.create({ prefix: 'tfnet' });
  const members = new Map<string, Member>();
  let coturn: Coturn | undefined;
  try {
    const server = await lab.publicHost('srv');
    const secret = randomBytes(18).toString('base64url');
    // Home LANs are private addresses the relay cannot reach (see CoturnOptions.deniedPeerRanges).
    coturn = await startCoturn(secret, { listenIp: server.address, port: TURN_PORT, spawn: (argv) => lab.spawn(server, argv), deniedPeerRanges: [HOME_LANS] });
    const stun = `stun:${server.address}:${TURN_PORT}`;
    const turn = [`turn:${server.address}:${TURN_PORT}?transport=udp`, `turn:${server.address}:${TURN_PORT}?transport=tcp`];
    const issuer = new IceIssuer({ stun: [stun], turn, turnSecret: secret }, serverClock);
    const relay = lab.spawn(server, [process.execPath, '--import', 'tsx', 'bench/internet/relay.ts', server.address, String(RELAY_PORT)], { cwd: repoRoot });
    await waitForLine(relay, /relay listening/, 'the signaling relay');
    const placed: Array<HomeSpec & { wan: string; host: string }> = [];
    const spawnMember = (spec: HomeSpec, host: LabHost) => {
      const child = lab.spawn(host, [process.execPath, '--import', 'tsx', 'bench/internet/member.ts', spec.name, server.address, String(RELAY_PORT)],
        { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] });
      const member = new Member(spec.name, spec, host, child);
      members.set(spec.name, member);
      return member;
    };
    for (const spec of homes) {
      const home = await lab.home(spec.name, { nat: spec.nat, blockUdp: spec.blockUdp, uplinkMbit: spec.uplinkMbit });
      const host = await home.host('m');
      spawnMember(spec, host);
      placed.push({ ...spec, wan: home.wanAddress, host: host.address });
    }
    await Promise.all([...members.values()].map((m) => m.ready));
    log(`lab ${lab.id}: coturn and the relay on ${server.address}, ${homes.length} homes: ${homes.map((h) => `${h.name} (${h.nat}${h.blockUdp ? ', UDP blocked' : ''})`).join(', ')}`);
    const started = coturn;
    return {
      lab, server, coturn: started, members,
      iceFor: (name) => issuer.serversFor(name),
      respawn: async (name) => {
        const old = members.get(name)!;
        const why = old.exit ?? 'still running';
        await spawnMember(old.home, old.host).ready;
        return why.split('\n')[0];
      },
      describe: () => ({ coturn: `Debian coturn ${started.url.split('?')[0]} (REST-API credentials, listening and relaying on ${server.address})`, stun, turn,
        relay: `${server.address}:${RELAY_PORT} (bench/internet/relay.ts, TCP)`, homes: placed }),
      close: async () => {
        for (const m of members.values()) await m.send({ cmd: 'exit' }).catch(() => {});
        started.stop();
        await lab.close();
      },
    };
  } catch (e) {
    coturn?.stop();
    await lab.close();
    throw e;
  }
}
