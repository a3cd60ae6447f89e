// The lab's address plan, only documentation ranges (RFC 5737), only inside the lab's namespaces:
// public hosts 203.0.113.10+, home routers' WAN 198.51.100.10+ (both on the one internet segment),
// each home's LAN a /28 of 192.0.2.0/24 (router .1, hosts .2–.14), so no two homes share addresses.

export const MAX_PUBLIC_HOSTS = 240;
export const MAX_HOMES = 16;
export const MAX_HOSTS_PER_HOME = 13;

export function publicAddress(index: number): string {
  return `203.0.113.${10 + index}`;
}

export function wanAddress(homeIndex: number): string {
  return `198.51.100.${10 + homeIndex}`;
}

/** The home's LAN: its router's address and the first host's, and the prefix length. */
export function lanAddress(homeIndex: number, hostIndex: number | 'router'): string {
  const base = homeIndex * 16;
  return `192.0.2.${base + 1 + (hostIndex === 'router' ? 0 : 1 + hostIndex)}`;
}

export const LAN_PREFIX = 28;

/** The home's LAN as a prefix. */
export function lanSubnet(homeIndex: number): string {
  return `192.0.2.${homeIndex * 16}/${LAN_PREFIX}`;
}
export const SEGMENT_PREFIX = 24;
/** What the internet segment carries: public hosts and home routers' WAN addresses. */
export const SEGMENT_RANGES = ['203.0.113.0/24', '198.51.100.0/24'];

/** Names for hosts and homes: short, so namespaces and messages stay readable. */
export const NAME_PATTERN = /^[a-z][a-z0-9]{0,11}$/;
