// A joiner's model from the members the server named (`model:load`'s peers) before the checkpoint's
// URL, as hivemind's load_state_from_peers: each asked in turn over a WebRTC link (collective's
// ModelShare), and what it sends is taken only when it is a checkpoint of the job's model whose
// parameters' digest is the one the server agreed. A member that sends anything else, or nothing in
// time, is passed over (its link closed) and the next is asked; after the last, the server's URL.
import { ModelShare, type Transport } from '@tabfleet/collective';
import { maxCheckpointBytes, verifyCheckpoint, type Clock, type JobSpec } from '@tabfleet/protocol';

/** How long the link to a named member may take to open (ms). */
export const PEER_LINK_MS = 15_000;

export interface PeerModelLoad {
  jobId: string;
  spec: JobSpec;
  seq: number;
  peers: readonly string[];
  /** checkpointDigest of the model (and state) of sync `seq`, as the server agreed it. */
  digest: string;
}

export interface PeerModelHooks {
  /** Signal the link to `peer` (outside any round) while it is asked; `unlink` ends that. */
  link(peer: string): void;
  unlink(peer: string): void;
  log(line: string): void;
  /** Each model frame's bytes as they arrive, from whichever member is sending. */
  onBytes(n: number): void;
  clock: Clock;
  /** Aborted when the server sent a newer model: the links close (the member stops sending) and no model is taken. */
  signal?: AbortSignal;
}

/**
 * The checkpoint of the first named member whose model is the agreed one, or null when none sent it
 * (each said why in the log) or the load was abandoned (hooks.signal). Links to all of them open at
 * once, within PEER_LINK_MS, and members are asked in the order their links opened: a member behind a
 * NAT it cannot cross costs no extra wait.
 */
export async function modelFromPeers(transport: Transport, load: PeerModelLoad, hooks: PeerModelHooks): Promise<{ peer: string; bytes: Uint8Array } | null> {
  const opened: string[] = [];
  let opening = load.peers.length;
  let wake = () => {};
  let done = false;
  const notTaken = (peer: string, why: string) => {
    if (done) return; // a link that failed after the model came from another
    hooks.log(`the model of sync ${load.seq} from ${peer} was not taken: ${why}`);
    transport.closeLink(peer, 'its model was not taken');
  };
  // On a thin link the member's bytes for a stale model would crowd out the newer one's.
  const abandon = () => {
    if (done) return;
    done = true;
    hooks.log(`the model of sync ${load.seq} from members is abandoned: the server sent a newer one`);
    for (const peer of load.peers) transport.closeLink(peer, 'a newer model was asked for');
    wake();
  };
  hooks.signal?.addEventListener('abort', abandon, { once: true });
  for (const peer of load.peers) {
    hooks.link(peer);
    within(transport.connect(peer), PEER_LINK_MS, hooks.clock, `no link within ${PEER_LINK_MS} ms`).then(
      () => opened.push(peer),
      (e: Error) => (notTaken(peer, e.message), hooks.unlink(peer)),
    ).finally(() => (opening--, wake()));
  }
  try {
    for (;;) {
      if (hooks.signal?.aborted) return null;
      const peer = opened.shift();
      if (peer === undefined) {
        if (opening === 0) return null;
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      try {
        const bytes = await ModelShare.of(transport).fetch(peer, { job: load.jobId, seq: load.seq, maxBytes: maxCheckpointBytes(load.spec), onBytes: hooks.onBytes });
        const { digest } = verifyCheckpoint(load.spec, bytes);
        if (digest !== load.digest) throw new Error(`it sent a model whose digest is ${digest}, not the agreed ${load.digest}`);
        return { peer, bytes };
      } catch (e) {
        notTaken(peer, (e as Error).message);
      }
    }
  } finally {
    done = true;
    hooks.signal?.removeEventListener('abort', abandon);
    for (const peer of load.peers) hooks.unlink(peer);
  }
}

function within<T>(p: Promise<T>, ms: number, clock: Clock, why: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = clock.after(ms, () => reject(new Error(why)));
    p.then((v) => (cancel(), resolve(v)), (e: unknown) => (cancel(), reject(e)));
  });
}
