// Typed failures of collective operations. Every rejected op carries one of these codes, so callers
// (the sync strategy, the round logic) can tell a lost member from a slow one from a bad peer.

export type CollectiveErrorCode =
  /** A ring member (or the link to it) went away. */
  | 'peer_lost'
  /** The op's deadline passed before it completed. */
  | 'deadline'
  /** Aborted from outside (round:abort, ring.abort()) or by another member's abort frame. */
  | 'aborted'
  /** A frame that fits the op's ids but not its shape (wrong length, segment, dtype, index range). */
  | 'bad_frame'
  /** The caller's arguments are unusable (lengths, member lists, closed ring). */
  | 'bad_argument';

export class CollectiveError extends Error {
  override name = 'CollectiveError';
  constructor(
    readonly code: CollectiveErrorCode,
    message: string,
    /** The member the failure is blamed on, when known. */
    readonly member?: string,
  ) {
    super(`${code}: ${message}`);
  }
}
