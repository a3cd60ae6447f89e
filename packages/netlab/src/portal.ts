// A portal lets the test process, which stays in the root namespace, reach a TCP service inside a lab
// namespace (the server's HTTP API and Socket.IO, a dashboard): a 127.0.0.1 port here, a relay in the
// namespace, and a Unix socket between them. Nothing crosses the namespaces' network stacks.
import { createServer, connect, type Server } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const RELAY = fileURLToPath(new URL('./relay.mjs', import.meta.url));

export interface Portal {
  /** A 127.0.0.1 port in the test's own namespace that leads to the service. */
  readonly port: number;
  close(): Promise<void>;
}

/** The root-namespace side: a loopback listener that joins each connection to the relay's socket. */
export async function openPortal(socketPath: string, relay: ChildProcess): Promise<Portal> {
  await new Promise<void>((resolve, reject) => {
    let out = '';
    relay.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('ready')) resolve();
    });
    relay.once('exit', (code) => reject(new Error(`netlab portal relay exited ${code} before it listened`)));
  });
  const server: Server = createServer((local) => {
    const remote = connect(socketPath);
    local.pipe(remote).pipe(local);
    const end = () => {
      local.destroy();
      remote.destroy();
    };
    local.on('error', end);
    remote.on('error', end);
    local.on('close', end);
    remote.on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      relay.kill();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A shell script that runs `executable` inside the namespace, for launchers that take a path (Playwright). */
export function launcherScript(ns: string, executable: string): string {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  return `#!/bin/sh\n# netlab: ${executable} inside ${ns}; the launcher's file descriptors (Playwright's pipe) pass through.\n`
    + `exec ip netns exec ${quote(ns)} ${quote(executable)} "$@"\n`;
}
