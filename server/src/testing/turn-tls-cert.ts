// A throwaway certificate authority and a server certificate it signs, for TURN over TLS in tests
// (`startCoturn(secret, { tls })`): made with Debian's `openssl` in a fresh directory, the server
// certificate naming the given IP addresses and DNS names. Nothing here is trusted by anything but a
// client told to trust `caCert`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificate {
  /** PEM files. */
  caCert: string;
  cert: string;
  key: string;
  remove(): void;
}

const NAME = /^[A-Za-z0-9.:-]{1,253}$/;

export function makeTestCertificate(names: { ips?: string[]; dns?: string[] }): TestCertificate {
  const ips = names.ips ?? [];
  const dns = names.dns ?? [];
  if (ips.length + dns.length === 0) throw new Error('makeTestCertificate: name at least one IP address or DNS name');
  for (const n of [...ips, ...dns]) if (!NAME.test(n)) throw new Error(`makeTestCertificate: bad name ${JSON.stringify(n)}`);
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-cert-'));
  const f = (name: string) => join(dir, name);
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', '/CN=tabfleet test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign', '-keyout', f('ca.key'), '-out', f('ca.pem')]);
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${ips[0] ?? dns[0]}`, '-keyout', f('server.key'), '-out', f('server.csr')]);
    const alt = [...ips.map((ip) => `IP:${ip}`), ...dns.map((d) => `DNS:${d}`)].join(',');
    writeFileSync(f('ext.cnf'), `subjectAltName=${alt}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`);
    openssl(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', f('ext.cnf'), '-out', f('server.pem')]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`makeTestCertificate: openssl failed: ${(err as { stderr?: Buffer }).stderr?.toString() ?? (err as Error).message}`);
  }
  return { caCert: f('ca.pem'), cert: f('server.pem'), key: f('server.key'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}
