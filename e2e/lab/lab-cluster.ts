// A cluster on the network lab: coturn (STUN and TURN, REST-API credentials) in one public host, the
// real server in another with --stun/--turn naming coturn's address, and one headless Chromium
// volunteer tab per home, each home behind its own NAT router. What the NAT tests of issue 36 share.
// Needs root (network namespaces) and the built apps; `close()` removes everything, also after a failure.
import { ensureBuilt } from '@tabfleet/headless';
import { NetLab, type Home, type HomeOptions, type LabHost } from '@tabfleet/netlab';
import { startCoturn, type Coturn } from '@tabfleet/server/testing';
import { openLabTab, type LabTab } from './lab-tab';
import { startLabServer, type LabServer, type LabServerOptions } from './lab-server';

export const TURN_SECRET = 'lab-turn-shared-secret-0123456789';
export const TURN_PORT = 3478;

export interface LabClusterOptions {
  /** One volunteer tab behind each home (`openTabs` opens them). */
  homes: HomeOptions[];
  /** 'up': coturn runs; 'down': the server names it but nothing answers there (default 'up'). */
  turn?: 'up' | 'down';
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
  /** Opens one tab in each home (on its host `t1`), one after another, each contributing. */
  openTabs(log?: (line: string) => void): Promise<LabTab[]>;
  close(): Promise<void>;
}

export async function startLabCluster(opts: LabClusterOptions): Promise<LabCluster> {
  await ensureBuilt('apps', console.log);
  const lab = await NetLab.create();
  const tabs: LabTab[] = [];
  let coturn: Coturn | null = null;
  const close = async () => {
    for (const t of tabs) await t.close().catch(() => {});
    coturn?.stop();
    await lab.close();
  };
  try {
    const turnHost = await lab.publicHost('turn');
    const serverHost = await lab.publicHost('srv');
    if ((opts.turn ?? 'up') === 'up') {
      coturn = await startCoturn(TURN_SECRET, { listenIp: turnHost.address, port: TURN_PORT, spawn: (argv) => lab.spawn(turnHost, argv) });
    }
    const stun = `stun:${turnHost.address}:${TURN_PORT}`;
    // UDP first; TCP for homes whose firewall drops UDP (same port, same credentials).
    const turn = ['udp', 'tcp'].map((t) => `turn:${turnHost.address}:${TURN_PORT}?transport=${t}`);
    const server = await startLabServer(lab, serverHost, { stun: [stun], turn, turnSecret: TURN_SECRET, args: opts.serverArgs });
    const homes: Home[] = [];
    // Every namespace is made before any tab starts, so no Chromium sees its network change under it.
    for (const [i, options] of opts.homes.entries()) homes.push(await lab.home(`home${i + 1}`, options));
    for (const home of homes) await home.host('t1');
    return {
      lab, server, turnSecret: TURN_SECRET, turnHost, coturn, homes, tabs, close,
      async openTabs(log) {
        for (const home of homes) tabs.push(await openLabTab(lab, home.hosts[0]!, server.url, home.name, log));
        return tabs;
      },
    };
  } catch (e) {
    await close();
    throw e;
  }
}
