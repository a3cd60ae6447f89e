// HTTPS for the lab, as on the internet: the server terminates TLS with a certificate for a lab name
// (tabfleet.test) from a private test CA, and each Chromium trusts that CA through an NSS database in its
// own HOME ($HOME/.pki/nssdb, where Chromium on Linux looks for a user's trust), as e2e/https-lab does.
// No --ignore-certificate-errors and no --unsafely-treat-insecure-origin-as-secure: the volunteer page is
// a secure context (WebGPU needs one) because the certificate checks out.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { makeTestCa, type IssuedCertificate } from '@tabfleet/server/testing';

/** The server's name in the lab (there is no DNS: each Chromium maps it to the server's address). */
export const LAB_NAME = 'tabfleet.test';
const CERTUTIL = '/usr/bin/certutil';

export interface LabTls {
  name: string;
  /** The CA's PEM text, which the test process trusts for its API calls. */
  ca: string;
  cert: IssuedCertificate;
  /** A HOME whose NSS database trusts the CA: each lab Chromium runs with it. */
  home: string;
  remove(): void;
}

export async function makeLabTls(): Promise<LabTls> {
  if (!existsSync(CERTUTIL)) throw new Error(`${CERTUTIL} is missing: install Debian's libnss3-tools (npm run setup, as root, does)`);
  const ca = await makeTestCa();
  const home = mkdtempSync(join(tmpdir(), 'tabfleet-lab-home-'));
  const remove = () => {
    ca.remove();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    const cert = await ca.issue({ dns: [LAB_NAME] });
    const nssdb = join(home, '.pki/nssdb');
    mkdirSync(nssdb, { recursive: true });
    await promisify(execFile)(CERTUTIL, ['-N', '-d', `sql:${nssdb}`, '--empty-password']);
    await promisify(execFile)(CERTUTIL, ['-A', '-d', `sql:${nssdb}`, '-n', 'tabfleet lab CA', '-t', 'C,,', '-i', ca.caPath]);
    return { name: LAB_NAME, ca: ca.ca, cert, home, remove };
  } catch (e) {
    remove();
    throw e;
  }
}
