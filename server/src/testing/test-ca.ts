// A private certificate authority for tests of https:// (Debian's openssl; scripts/setup.mjs installs
// it): a CA valid for two days and server certificates it signs for the names and addresses a test
// asks for, all in a temporary directory. Clients trust it by its PEM (`ca`, NODE_EXTRA_CA_CERTS), or
// a browser through an NSS database (e2e/https-lab).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const OPENSSL = '/usr/bin/openssl';

/** A certificate the CA signed, as files (for `--tls-cert`, `--tls-key`, a proxy's config) and as PEM text. */
export interface IssuedCertificate {
  certPath: string;
  keyPath: string;
  cert: string;
  key: string;
}

export interface TestCa {
  dir: string;
  /** The CA certificate's file and PEM text: what a client trusts. */
  caPath: string;
  ca: string;
  /** A server certificate for these DNS names and IP addresses (subjectAltName), signed by the CA. */
  issue(names: { dns?: string[]; ip?: string[] }): Promise<IssuedCertificate>;
  remove(): void;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export async function makeTestCa(): Promise<TestCa> {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-ca-'));
  const openssl = (args: string[]) => promisify(execFile)(OPENSSL, args, { cwd: dir }).catch((e: Error & { stderr?: string }) => {
    throw new Error(`openssl ${args[0]} failed (is Debian's openssl installed? npm run setup does): ${e.stderr ?? e.message}`);
  });
  await openssl(['req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=tabfleet test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  let issued = 0;
  return {
    dir,
    caPath: join(dir, 'ca.pem'),
    ca: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    async issue({ dns = [], ip = [] }) {
      const names = [...dns.map((n) => `DNS:${n}`), ...ip.map((a) => `IP:${a}`)];
      if (names.length === 0) throw new Error('makeTestCa().issue: give at least one DNS name or IP address');
      const base = `server-${++issued}`;
      await openssl(['req', ...EC, '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${dns[0] ?? ip[0]}`]);
      writeFileSync(join(dir, `${base}.ext`), `basicConstraints=CA:FALSE\nsubjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n`);
      await openssl(['x509', '-req', '-in', `${base}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${base}.pem`, '-days', '2', '-extfile', `${base}.ext`]);
      const certPath = join(dir, `${base}.pem`), keyPath = join(dir, `${base}.key`);
      return { certPath, keyPath, cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
