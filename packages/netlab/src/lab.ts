// The lab: an "internet" namespace holding one bridge, public hosts and home routers on it through veth
// pairs, and hosts behind each router on its LAN bridge. Every interface, address, rule and qdisc lives
// in a namespace the lab made; the root namespace's routes, addresses and rules are never touched.
// Latency is not modeled (the kernel here has tbf but no netem): links are as fast as veth.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listNamespaces, runCommand, type CommandResult, type RunOptions } from './command';
import { removeNamespace, runReaper, startReaper, sweepLeftovers } from './cleanup';
import {
  LAN_PREFIX, MAX_HOMES, MAX_HOSTS_PER_HOME, MAX_PUBLIC_HOSTS, NAME_PATTERN, SEGMENT_PREFIX, SEGMENT_RANGES, lanAddress, lanSubnet, publicAddress, wanAddress,
} from './addresses';
import { ROUTER_TABLE, routerRuleset, tbfArgs, type NatKind, type RouterCounter } from './router';
import { checkRequirements } from './requirements';
import { RELAY, launcherScript, openPortal, type Portal } from './portal';

/** A namespace with one address: a public host, or a host in a home. */
export interface LabHost {
  readonly name: string;
  readonly ns: string;
  readonly address: string;
}

export interface HomeOptions {
  nat: NatKind;
  /** Drop UDP leaving the home (TCP still passes). */
  blockUdp?: boolean;
  /** Cap on the home's upload, a tbf on the router's WAN egress. */
  uplinkMbit?: number;
  /** Cap on the home's download, a tbf on the internet side of the router's WAN link. */
  downlinkMbit?: number;
}

/** A home: its router namespace (`ns`) with WAN and LAN addresses, and the hosts behind it. */
export class Home {
  readonly hosts: LabHost[] = [];

  constructor(
    private readonly lab: NetLab,
    readonly name: string,
    readonly index: number,
    readonly ns: string,
    /** The router's address on the internet segment: what public hosts see. */
    readonly wanAddress: string,
    /** The router's address on the home's LAN, the hosts' gateway. */
    readonly lanAddress: string,
    readonly options: Readonly<HomeOptions>,
  ) {
    this.lanSubnet = lanSubnet(index);
  }

  /** The home's LAN prefix (a /28 of 192.0.2.0/24), no other home's. */
  readonly lanSubnet: string;

  /** A host namespace behind this home's router. */
  host(name: string): Promise<LabHost> {
    return this.lab.addHomeHost(this, name);
  }

  /** Packets counted by one of the router's named nftables counters. */
  async counter(name: RouterCounter): Promise<number> {
    const { stdout } = await this.lab.exec(this.ns, ['nft', '-j', 'list', 'counter', 'ip', ROUTER_TABLE, name]);
    const parsed = JSON.parse(stdout) as { nftables: Array<{ counter?: { packets: number } }> };
    const entry = parsed.nftables.find((e) => e.counter !== undefined);
    if (!entry) throw new Error(`no counter ${name} in ${this.ns}`);
    return entry.counter!.packets;
  }
}

export interface NetLabOptions {
  /** Namespaces are named `${prefix}-${pid}-${n}-…`; leftovers of dead labs with it are swept at start. */
  prefix?: string;
}

let labsInThisProcess = 0;

export class NetLab {
  /** The namespace holding the internet segment's bridge. */
  readonly internet: string;
  readonly publicHosts: LabHost[] = [];
  readonly homes: Home[] = [];
  private readonly children = new Set<ChildProcess>();
  private readonly portals: Portal[] = [];
  private closed = false;

  private constructor(
    /** Every namespace of this lab starts with `${id}-`. */
    readonly id: string,
    private readonly reaper: ChildProcess,
    /** The lab's files (launchers, portal sockets), removed with it. */
    private readonly dir: string,
  ) {
    this.internet = `${id}-inet`;
  }

  static async create(opts: NetLabOptions = {}): Promise<NetLab> {
    const prefix = opts.prefix ?? 'tfl';
    if (!/^[a-z][a-z0-9]{0,7}$/.test(prefix)) throw new Error(`netlab prefix ${JSON.stringify(prefix)}: 1–8 lowercase letters or digits, first a letter`);
    await checkRequirements();
    await sweepLeftovers(prefix);
    const id = `${prefix}-${process.pid}-${++labsInThisProcess}`;
    const dir = await mkdtemp(join(tmpdir(), `${id}-`));
    const lab = new NetLab(id, startReaper(id, dir), dir);
    try {
      await lab.addNamespace(lab.internet);
      await lab.ip(lab.internet, ['link', 'add', 'seg', 'type', 'bridge']);
      await lab.ip(lab.internet, ['link', 'set', 'seg', 'up']);
    } catch (err) {
      await lab.close();
      throw new Error(`netlab: building the internet segment failed (needs network namespaces, veth and bridges): ${(err as Error).message}`);
    }
    return lab;
  }

  /** A namespace on the internet segment with a 203.0.113.x address (a server, coturn). */
  async publicHost(name: string): Promise<LabHost> {
    this.assertOpen();
    checkName('public host', name, this.publicHosts);
    const index = this.publicHosts.length;
    if (index >= MAX_PUBLIC_HOSTS) throw new Error(`netlab: at most ${MAX_PUBLIC_HOSTS} public hosts`);
    const host: LabHost = { name, ns: `${this.id}-pub-${name}`, address: publicAddress(index) };
    this.publicHosts.push(host);
    await this.addNamespace(host.ns);
    await this.attachToSegment(host.ns, 'eth0', `p${index}`);
    await this.ip(host.ns, ['addr', 'add', `${host.address}/${SEGMENT_PREFIX}`, 'dev', 'eth0']);
    await this.ip(host.ns, ['link', 'set', 'eth0', 'up']);
    await this.routeSegment(host.ns, 'eth0');
    return host;
  }

  /** A home router namespace (WAN 198.51.100.x on the segment, LAN 192.0.2.x/28) with its NAT and caps. */
  async home(name: string, options: HomeOptions): Promise<Home> {
    this.assertOpen();
    checkName('home', name, this.homes);
    checkHomeOptions(name, options);
    const index = this.homes.length;
    if (index >= MAX_HOMES) throw new Error(`netlab: at most ${MAX_HOMES} homes`);
    const home = new Home(this, name, index, `${this.id}-home-${name}`, wanAddress(index), lanAddress(index, 'router'), { ...options });
    this.homes.push(home);
    const ns = home.ns;
    const segmentPort = `h${index}`;
    await this.addNamespace(ns);
    await this.exec(ns, ['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    await this.attachToSegment(ns, 'wan', segmentPort);
    // Answer ARP on the WAN only for the WAN address, so the LAN is unreachable from the segment.
    await this.exec(ns, ['sysctl', '-qw', 'net.ipv4.conf.wan.arp_ignore=1']);
    await this.ip(ns, ['addr', 'add', `${home.wanAddress}/${SEGMENT_PREFIX}`, 'dev', 'wan']);
    await this.ip(ns, ['link', 'set', 'wan', 'up']);
    await this.routeSegment(ns, 'wan');
    await this.ip(ns, ['link', 'add', 'lan', 'type', 'bridge']);
    await this.ip(ns, ['addr', 'add', `${home.lanAddress}/${LAN_PREFIX}`, 'dev', 'lan']);
    await this.ip(ns, ['link', 'set', 'lan', 'up']);
    try {
      await this.exec(ns, ['nft', '-f', '-'], { input: routerRuleset({ nat: options.nat, blockUdp: options.blockUdp ?? false }) });
    } catch (err) {
      throw new Error(`netlab: home ${name}: nftables NAT failed (needs nf_tables with masquerade): ${(err as Error).message}`);
    }
    try {
      if (options.uplinkMbit !== undefined) await runCommand(['tc', '-n', ns, ...tbfArgs('wan', options.uplinkMbit)]);
      if (options.downlinkMbit !== undefined) await runCommand(['tc', '-n', this.internet, ...tbfArgs(segmentPort, options.downlinkMbit)]);
    } catch (err) {
      throw new Error(`netlab: home ${name}: the tbf shaper failed (needs sch_tbf): ${(err as Error).message}`);
    }
    return home;
  }

  /** @internal Home.host's work: a namespace on the home's LAN bridge, its router as gateway. */
  async addHomeHost(home: Home, name: string): Promise<LabHost> {
    this.assertOpen();
    checkName(`host in home ${home.name}`, name, home.hosts);
    const index = home.hosts.length;
    if (index >= MAX_HOSTS_PER_HOME) throw new Error(`netlab: at most ${MAX_HOSTS_PER_HOME} hosts in a home`);
    const host: LabHost = { name, ns: `${this.id}-host-${home.name}-${name}`, address: lanAddress(home.index, index) };
    home.hosts.push(host);
    const port = `l${index}`;
    await this.addNamespace(host.ns);
    await this.ip(home.ns, ['link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', host.ns]);
    await this.ip(home.ns, ['link', 'set', port, 'master', 'lan', 'up']);
    await this.ip(host.ns, ['addr', 'add', `${host.address}/${LAN_PREFIX}`, 'dev', 'eth0']);
    await this.ip(host.ns, ['link', 'set', 'eth0', 'up']);
    await this.ip(host.ns, ['route', 'add', 'default', 'via', home.lanAddress]);
    return host;
  }

  /** Runs argv inside a namespace of this lab to its end (`ip netns exec`); rejects on a non-zero exit. */
  async exec(target: string | LabHost | Home, argv: string[], opts: RunOptions = {}): Promise<CommandResult> {
    return runCommand(['ip', 'netns', 'exec', this.nsOf(target), ...argv], opts);
  }

  /**
   * Starts a long-lived process inside a namespace (a server, coturn, Chromium); close() ends it.
   * stdout and stderr are pipes unless `options.stdio` says otherwise: read them, or a chatty process stalls.
   */
  spawn(target: string | LabHost | Home, argv: string[], options: SpawnOptions = {}): ChildProcess {
    this.assertOpen();
    const child = spawn('ip', ['netns', 'exec', this.nsOf(target), ...argv], { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
    return child;
  }

  /** Lets this process reach `host:port` inside a namespace through a 127.0.0.1 port (see portal.ts). */
  async portal(target: string | LabHost | Home, host: string, port: number): Promise<Portal> {
    const ns = this.nsOf(target);
    const socketPath = join(this.dir, `portal-${this.portals.length}.sock`);
    const relay = this.spawn(ns, [process.execPath, RELAY, socketPath, host, String(port)]);
    const portal = await openPortal(socketPath, relay);
    this.portals.push(portal);
    return portal;
  }

  /** A path that runs `executable` inside a namespace: Playwright's `executablePath` for a tab in a home. */
  async launcherIn(target: string | LabHost | Home, executable: string): Promise<string> {
    const ns = this.nsOf(target);
    const path = join(this.dir, `launch-${ns.slice(this.id.length + 1)}-${executable.split('/').at(-1)}`);
    await writeFile(path, launcherScript(ns, executable));
    await chmod(path, 0o755);
    return path;
  }

  /** This lab's namespaces that exist now. */
  async namespaces(): Promise<string[]> {
    return (await listNamespaces()).filter((ns) => ns.startsWith(`${this.id}-`));
  }

  /** Ends the lab's processes (SIGTERM, then what is left is killed) and deletes every namespace it made. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const exits = [...this.children].map((child) => new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    }));
    // A process that ignores SIGTERM is killed with its namespace by the reaper after a grace period.
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(exits), new Promise<void>((resolve) => (grace = setTimeout(resolve, 3000)))]);
    clearTimeout(grace);
    for (const portal of this.portals) await portal.close();
    await runReaper(this.reaper);
    await rm(this.dir, { recursive: true, force: true });
    for (const ns of await this.namespaces()) await removeNamespace(ns);
    const left = await this.namespaces();
    if (left.length > 0) throw new Error(`netlab: namespaces left after close: ${left.join(' ')}`);
  }

  private nsOf(target: string | LabHost | Home): string {
    const ns = typeof target === 'string' ? target : target.ns;
    if (!ns.startsWith(`${this.id}-`)) throw new Error(`netlab: ${ns} is not a namespace of lab ${this.id}`);
    return ns;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`netlab ${this.id} is closed`);
  }

  private async addNamespace(ns: string): Promise<void> {
    await runCommand(['ip', 'netns', 'add', ns]);
    // IPv4 only: the lab's addresses are IPv4, and an IPv6 link-local address finishing duplicate
    // address detection a second after an interface comes up is a network change to Chromium, which
    // then fails a page load in flight (net::ERR_NETWORK_CHANGED, seen in a full test run).
    await this.exec(ns, ['sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1']);
    await this.ip(ns, ['link', 'set', 'lo', 'up']);
  }

  /** A veth pair from the segment's bridge (port `port`) to `ifname` in `ns`, made inside the namespaces. */
  private async attachToSegment(ns: string, ifname: string, port: string): Promise<void> {
    await this.ip(this.internet, ['link', 'add', port, 'type', 'veth', 'peer', 'name', ifname, 'netns', ns]);
    await this.ip(this.internet, ['link', 'set', port, 'master', 'seg', 'up']);
  }

  /**
   * Routes on the segment: both of its ranges on-link, nothing else. No default route, so a packet for
   * any other address (a browser's background request, another home's LAN) is refused where it starts
   * and never reaches the segment. Hosts in homes do have a default route, to their router: Chromium
   * gathers ICE candidates on the default route's interface.
   */
  private async routeSegment(ns: string, dev: string): Promise<void> {
    for (const range of SEGMENT_RANGES) {
      await this.ip(ns, ['route', 'replace', range, 'dev', dev]);
    }
  }

  private ip(ns: string, args: string[]): Promise<CommandResult> {
    return runCommand(['ip', '-n', ns, ...args]);
  }
}

function checkName(what: string, name: string, taken: ReadonlyArray<{ name: string }>): void {
  if (!NAME_PATTERN.test(name)) throw new Error(`netlab: ${what} name ${JSON.stringify(name)}: 1–12 lowercase letters or digits, first a letter`);
  if (taken.some((t) => t.name === name)) throw new Error(`netlab: ${what} ${name} exists already`);
}

function checkHomeOptions(name: string, options: HomeOptions): void {
  if (options.nat !== 'eim' && options.nat !== 'symmetric') throw new Error(`netlab: home ${name}: nat must be 'eim' or 'symmetric', not ${JSON.stringify(options.nat)}`);
  if (options.blockUdp !== undefined && typeof options.blockUdp !== 'boolean') throw new Error(`netlab: home ${name}: blockUdp must be a boolean`);
  for (const key of ['uplinkMbit', 'downlinkMbit'] as const) {
    const v = options[key];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0 && v <= 10_000)) {
      throw new Error(`netlab: home ${name}: ${key} must be a number of Mbit/s in (0, 10000], not ${JSON.stringify(v)}`);
    }
  }
}
