// IPC between the soak (bench/soak.ts) and its server process (server-process.ts).
import type { ServerOptions } from '@tabfleet/server';

export interface SoakServerArgs {
  port: number;
  dataDir: string;
  token: string;
  timing: NonNullable<ServerOptions['timing']>;
  /** A node of several sharing this Redis (bench/soak/node-kill.test.ts), instead of SQLite in dataDir. */
  redisUrl?: string;
  nodeId?: string;
}

export type ToSoakServer = { type: 'stats' };

export type FromSoakServer =
  | { type: 'ready'; url: string; pid: number }
  | { type: 'stats'; rssBytes: number; heapUsedBytes: number; gc: boolean }
  | { type: 'fatal'; message: string };
