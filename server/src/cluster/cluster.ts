// Which server node runs which job's coordinator, and how nodes call each other. One node owns every
// job (LocalCluster); with Redis, jobs are leased to nodes and calls travel over pub/sub (RedisCluster).

/** A call to the node that owns a job; JSON with binary fields carried as { $bytes: base64 }. */
export type HubCall =
  | { op: 'join'; jobId: string; volunteer: unknown }
  | { op: 'leave'; jobId: string; volunteerId: string; reason: string }
  | { op: 'event'; jobId: string; volunteerId: string; name: string; payload: unknown }
  | { op: 'status'; jobId: string; volunteerId: string; status: unknown }
  | { op: 'downloadRefused'; jobId: string; shard: number }
  | { op: 'stop'; jobId: string; reason: string }
  | { op: 'summary'; jobId: string }
  | { op: 'workers'; jobId: string };

export type HubReply = { ok: true; value: unknown } | { ok: false; error: { code: string; message: string } };

/**
 * What every node hears: a job was created (idle volunteers may take it), or a job's coordinator was
 * started on a node (at its start, or adopting it from a node that went away): volunteers that were
 * members of it under the old coordinator are members no more, and must join again.
 */
export type ClusterNews =
  | { kind: 'job-created' | 'job-loaded'; jobId: string }
  /** The rooms dashboards on `nodeId` are in (watch.ts), sent when they change and periodically. */
  | { kind: 'watching'; nodeId: string; rooms: string[] };

export interface Cluster {
  readonly nodeId: string;
  /** False when this node is the only one (no other node can own a job). */
  readonly multiNode: boolean;
  /** Takes (or renews) ownership of a job; true when this node owns it afterwards. */
  claim(jobId: string): Promise<boolean>;
  /** Gives up ownership (job ended or node closing). */
  release(jobId: string): Promise<void>;
  /** The owning node, or null when nobody holds the lease. */
  ownerOf(jobId: string): Promise<string | null>;
  call(nodeId: string, call: HubCall): Promise<HubReply>;
  /** Serves calls from other nodes. */
  serve(handler: (call: HubCall) => Promise<HubReply>): void;
  /** Tells every node (including this one) something happened. */
  broadcast(message: ClusterNews): Promise<void>;
  onBroadcast(handler: (message: ClusterNews) => void): void;
  close(): Promise<void>;
}

export class LocalCluster implements Cluster {
  readonly multiNode = false;
  private broadcastHandlers: ((m: ClusterNews) => void)[] = [];
  constructor(readonly nodeId: string) {}
  async claim(): Promise<boolean> {
    return true;
  }
  async release(): Promise<void> {}
  async ownerOf(): Promise<string> {
    return this.nodeId;
  }
  async call(): Promise<HubReply> {
    throw new Error('a single-node cluster has no other node to call');
  }
  serve(): void {}
  async broadcast(message: ClusterNews): Promise<void> {
    for (const h of this.broadcastHandlers) h(message);
  }
  onBroadcast(handler: (message: ClusterNews) => void): void {
    this.broadcastHandlers.push(handler);
  }
  async close(): Promise<void> {}
}

/** JSON with Uint8Array fields as { $bytes: base64 }, for calls between nodes. */
export function encodeCall(value: unknown): string {
  return JSON.stringify(value, (_k, v) => {
    if (v instanceof Uint8Array) return { $bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
    // A Buffer has already been through its toJSON by the time the replacer sees it.
    if (v && v.type === 'Buffer' && Array.isArray(v.data)) return { $bytes: Buffer.from(v.data).toString('base64') };
    return v;
  });
}

export function decodeCall<T>(text: string): T {
  return JSON.parse(text, (_k, v) => (v && typeof v === 'object' && typeof v.$bytes === 'string' && Object.keys(v).length === 1 ? new Uint8Array(Buffer.from(v.$bytes, 'base64')) : v)) as T;
}
