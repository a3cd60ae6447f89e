// What makes a home router: its nftables ruleset (NAT of one kind, the firewall) and its shapers.
// Mapping, in RFC 4787's terms: `eim` is Linux masquerade, which keeps a socket's source port for
// every destination as long as no other mapping already holds that port toward the same destination
// (endpoint-independent mapping in practice); `symmetric` is masquerade with `fully-random`, a fresh
// random port per connection (endpoint-dependent). Filtering is conntrack's for both: a reply is let
// in only from the address and port the mapping was made toward (address-and-port-dependent).

export type NatKind = 'eim' | 'symmetric';

export interface RouterRules {
  nat: NatKind;
  blockUdp: boolean;
}

/** Named counters in the router's table, read by `Home.counter`. */
export const ROUTER_COUNTERS = ['udp_blocked', 'wan_unsolicited', 'wan_input_dropped'] as const;
export type RouterCounter = (typeof ROUTER_COUNTERS)[number];

export const ROUTER_TABLE = 'netlab';

/** The router's ruleset for `nft -f -`; its interfaces are `wan` and the LAN bridge `lan`. */
export function routerRuleset(rules: RouterRules): string {
  const masquerade = rules.nat === 'symmetric' ? 'masquerade fully-random' : 'masquerade';
  // The forward policy stays accept: LAN-to-LAN traffic is bridged and must pass even where br_netfilter
  // hands bridged packets to these hooks; what is dropped is named.
  return `table ip ${ROUTER_TABLE} {
  ${ROUTER_COUNTERS.map((c) => `counter ${c} {}`).join('\n  ')}
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "wan" ${masquerade}
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    ${rules.blockUdp ? 'iifname "lan" oifname "wan" meta l4proto udp counter name udp_blocked drop' : ''}
    iifname "wan" ct state established,related accept
    iifname "wan" counter name wan_unsolicited drop
  }
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "wan" ct state established,related accept
    iifname "wan" counter name wan_input_dropped drop
  }
}
`;
}

/** `tc` arguments of a token bucket at this rate on an interface's egress. */
export function tbfArgs(dev: string, mbit: number): string[] {
  // The bucket holds 4 ms at the rate (at least two full frames), the queue 50 ms: TCP fills the link
  // without the burst inflating a bulk transfer's rate.
  const burstBytes = Math.max(3100, Math.round((mbit * 1e6) / 8 / 250));
  return ['qdisc', 'add', 'dev', dev, 'root', 'tbf', 'rate', `${mbit}mbit`, 'burst', String(burstBytes), 'latency', '50ms'];
}
