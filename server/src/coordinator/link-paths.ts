// The paths members' WebRTC links took (`links:paths`: each link's selected ICE candidate pair and
// round trip, protocol's link-paths.ts): each member's latest report, kept while it is a member, read
// by the worker table (a member's own links), the job summary and /metrics (the links among members,
// each counted once, direct or relayed).
import { ProtocolError, summarizeLinks, type LinkPath, type LinkSummary } from '@tabfleet/protocol';
import type { MemberBook } from './members';

export class LinkPaths {
  private readonly byMember = new Map<string, LinkPath[]>();

  constructor(private readonly members: MemberBook) {}

  /** A member's report replaces its last one; links to peers that are not members (any more) are not kept. */
  report(volunteerId: string, links: readonly LinkPath[]): { kept: number } {
    if (links.some((l) => l.peer === volunteerId)) throw new ProtocolError('bad_request', 'links:paths: a member has no link to itself');
    const kept = links.filter((l) => this.members.has(l.peer));
    this.byMember.set(volunteerId, kept);
    return { kept: kept.length };
  }

  forget(volunteerId: string): void {
    this.byMember.delete(volunteerId);
  }

  /** The member's links to current members, as it last reported them ([] before any report). */
  of(volunteerId: string): LinkPath[] {
    return (this.byMember.get(volunteerId) ?? []).filter((l) => this.members.has(l.peer));
  }

  summary(): LinkSummary {
    const reports = [...this.byMember].map(([volunteerId, links]) => ({ volunteerId, links }));
    return summarizeLinks(reports, (id) => this.members.has(id));
  }
}
