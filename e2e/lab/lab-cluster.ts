// A cluster on the network lab: coturn (STUN and TURN, REST-API credentials) in one public host, the
// real server in another with --stun/--turn naming coturn's address and serving https:// under a lab
// name with a test CA's certificate (lab-tls.ts), and one headless Chromium volunteer tab per home, each
// home behind its own NAT router. What the NAT tests of issue 36 share.
// Needs root (network namespaces) and the built apps; `close()` removes everything, also after a failure.
import type { Browser } from 'playwright-core';
import { ensureBuilt, openPage, type OpenedPage } from '@tabfleet/headless';
import { NetLab, type Home, type HomeOptions, type LabHost } from '@tabfleet/netlab';
import { startCoturn, type Coturn } from '@tabfleet/server/testing';
import { launchLabChromium, openLabTab, type LabTab } from './lab-tab';
import { startLabServer, type LabServer, type LabServerOptions } from './lab-server';
import { makeLabTls, type LabTls } from './lab-tls';

export const TURN_SECRET = 'lab-turn-shared-secret-0123456789';
export const TURN_PORT = 3478;
/** Every home's LAN (netlab gives each a /28 of 192.0.2.0/24). */
const HOME_LANS = '192.0.2.0-192.0.2.255';
/** coturn's longest allocation lifetime in the lab (see startLabCluster). */
export const ALLOCATION_LIFETIME_S = 30;

export interface LabClusterOptions {
  /** The homes, each with its NAT and `tabs` volunteer tabs behind it (default 1; `openTabs` opens them). */
  homes: Array<HomeOptions & { tabs?: number }>;
  /** 'up': coturn runs; 'down': the server names it but nothing answers there (default 'up'). */
  turn?: 'up' | 'down';
  /**
   * The TURN URLs the server hands out, one per transport, same port and credentials (default ['udp']).
   * ['udp', 'tcp'] lets a home that drops UDP relay over TCP. Tests that wait for coturn to close every
   * allocation of a closed page keep the default: its TCP allocations were not all closed a minute later.
   */
  turnTransports?: Array<'udp' | 'tcp'>;
  /** More server command-line options. */
  serverArgs?: LabServerOptions['args'];
}

export interface LabCluster {
  lab: NetLab;
  server: LabServer;
  /** The shared secret coturn and the server hold (a test checks it never reaches a log or a page). */
  turnSecret: string;
  /** The public host coturn runs in (or would, when it is down). */
  turnHost: LabHost;
  /** null when the cluster was made with turn: 'down'. */
  coturn: Coturn | null;
  homes: Home[];
  tabs: LabTab[];
  /** Opens the tabs (one per host `t1`, `t2`, … of each home), one after another, each contributing. */
  openTabs(log?: (line: string) => void): Promise<LabTab[]>;
  /** A page of the server (`/apps/dashboard/…`) in a Chromium of the server's public host, over https as the tabs. */
  openServerPage(path: string, log?: (line: string) => void): Promise<OpenedPage>;
  close(): Promise<void>;
}

export async function startLabCluster(opts: LabClusterOptions): Promise<LabCluster> {
  await ensureBuilt('apps', console.log);
  const lab = await NetLab.create();
  const tabs: LabTab[] = [];
  const browsers: Browser[] = [];
  let coturn: Coturn | null = null;
  let server: LabServer | undefined;
  let tls: LabTls | undefined;
  const close = async () => {
    for (const t of tabs) await t.close().catch(() => {});
    for (const b of browsers) await b.close().catch(() => {});
    coturn?.stop();
    await lab.close();
    server?.removeData();
    tls?.remove();
  };
  try {
    tls = await makeLabTls();
    const turnHost = await lab.publicHost('turn');
    const serverHost = await lab.publicHost('srv');
    if ((opts.turn ?? 'up') === 'up') {
      coturn = await startCoturn(TURN_SECRET, {
        listenIp: turnHost.address, port: TURN_PORT, spawn: (argv) => lab.spawn(turnHost, argv),
        // The homes' LANs are the lab's private addresses, which tabs offer as host candidates. coturn asked to
        // send there gets ENETUNREACH (public hosts have no route to them) and closes the allocation; operators
        // deny private ranges (RFC 1918) for the same reason and against relaying into their own network.
        deniedPeerRanges: [HOME_LANS],
        // Tests wait for every allocation of a closed page to close. Chromium usually deallocates as the
        // page closes, but once (CI, stop 43) a tab's allocations stayed open past a minute; with 30 s
        // lifetimes (refreshed every 15 s while the tab lives) a forgotten one lapses within 30 s.
        maxAllocateLifetimeS: ALLOCATION_LIFETIME_S,
      });
    }
    const stun = `stun:${turnHost.address}:${TURN_PORT}`;
    const turn = (opts.turnTransports ?? ['udp']).map((t) => `turn:${turnHost.address}:${TURN_PORT}?transport=${t}`);
    const started = await startLabServer(lab, serverHost, { stun: [stun], turn, turnSecret: TURN_SECRET, args: opts.serverArgs, tls });
    server = started;
    const homes: Home[] = [];
    // Every namespace is made before any tab starts, so no Chromium sees its network change under it.
    for (const [i, { tabs: count = 1, ...options }] of opts.homes.entries()) {
      const home = await lab.home(`home${i + 1}`, options);
      for (let t = 1; t <= count; t++) await home.host(`t${t}`);
      homes.push(home);
    }
    const labTls = tls;
    return {
      lab, server: started, turnSecret: TURN_SECRET, turnHost, coturn, homes, tabs, close,
      async openTabs(log) {
        for (const home of homes) {
          for (const host of home.hosts) tabs.push(await openLabTab(lab, host, started, labTls, home.hosts.length > 1 ? `${home.name}/${host.name}` : home.name, log));
        }
        return tabs;
      },
      async openServerPage(path, log) {
        const browser = await launchLabChromium(lab, serverHost, started, labTls);
        browsers.push(browser);
        return openPage(browser, `${started.url}${path}`, { log });
      },
    };
  } catch (e) {
    await close();
    throw e;
  }
}
