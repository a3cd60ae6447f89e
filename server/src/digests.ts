// The server's SHA-256: node:crypto's, for the model digests it takes of every uploaded checkpoint
// (protocol's portable one took 8 ms of the event loop for the coordinator bench's 800 KB model).
import { createHash } from 'node:crypto';
import { useNativeSha256 } from '@tabfleet/protocol';

export function useNodeSha256(): void {
  useNativeSha256((data) => createHash('sha256').update(data).digest('hex'));
}
