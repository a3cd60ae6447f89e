// TLS the server terminates itself (`--tls-cert`, `--tls-key`): the PEM files read and checked before
// anything listens, so a missing file, a file that is not PEM, or a key that does not belong to the
// certificate stops the start with a message that names the file, never with a handshake that fails later.
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { X509Certificate, createPrivateKey } from 'node:crypto';

/** A certificate chain (leaf first) and its private key, PEM. */
export interface TlsFiles {
  cert: string;
  key: string;
}

/** The checked PEM text of a certificate and a key, or an Error naming what is wrong (the key's text is never in it). */
export function checkTls(tls: TlsFiles, names = { cert: 'the certificate', key: 'the key' }): TlsFiles {
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(tls.cert);
  } catch {
    throw new Error(`${names.cert} is not a PEM certificate (want -----BEGIN CERTIFICATE-----)`);
  }
  let key;
  try {
    key = createPrivateKey(tls.key);
  } catch {
    throw new Error(`${names.key} is not a PEM private key without a passphrase (want -----BEGIN PRIVATE KEY-----, EC or RSA)`);
  }
  if (!leaf.checkPrivateKey(key)) throw new Error(`${names.key} does not belong to ${names.cert} (${leaf.subject.replace(/\n/g, ', ')}): the key and certificate must be a pair`);
  // What the https server will do with them, so that nothing else it refuses reaches listen().
  createSecureContext({ cert: tls.cert, key: tls.key });
  return tls;
}

/** Reads and checks `--tls-cert` and `--tls-key` files (`checkTls`); errors name the option and the path. */
export function readTlsFiles(certPath: string, keyPath: string): TlsFiles {
  const read = (option: string, path: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new Error(`${option} ${path}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'not readable' : (e as Error).message}`);
    }
  };
  return checkTls({ cert: read('--tls-cert', certPath), key: read('--tls-key', keyPath) }, { cert: `--tls-cert ${certPath}`, key: `--tls-key ${keyPath}` });
}

/** Days until the leaf certificate expires (negative once it has), for the start log. */
export function daysLeft(cert: string, now = Date.now()): number {
  return Math.floor((Date.parse(new X509Certificate(cert).validTo) - now) / 86_400_000);
}
