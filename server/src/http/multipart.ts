// multipart/form-data bodies (RFC 7578), as a browser's FormData and `curl -F` send them: the named
// parts of a body already read within its size limit. Only what uploads need: names, file names, bytes.
import { ProtocolError } from '@tabfleet/protocol';

export interface FormPart {
  name: string;
  filename: string | null;
  data: Uint8Array;
}

/** The boundary of a multipart/form-data content type, or null for any other type. */
export function multipartBoundary(contentType: string | undefined): string | null {
  if (!contentType || !/^multipart\/form-data\s*;/i.test(contentType)) return null;
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  if (!m) throw new ProtocolError('bad_request', 'a multipart/form-data body without a boundary');
  return m[1] ?? m[2];
}

/** The parts of a multipart body by name; a malformed body is a clear 400. */
export function parseMultipart(body: Uint8Array, boundary: string): Map<string, FormPart> {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const delimiter = Buffer.from(`--${boundary}`);
  const bad = (why: string) => new ProtocolError('bad_request', `malformed multipart/form-data body: ${why}`);
  const parts = new Map<string, FormPart>();
  let at = buf.indexOf(delimiter);
  if (at < 0) throw bad('no boundary line');
  for (;;) {
    at += delimiter.length;
    if (buf[at] === 0x2d && buf[at + 1] === 0x2d) return parts; // the closing "--boundary--"
    if (buf[at] !== 0x0d || buf[at + 1] !== 0x0a) throw bad('a boundary line not followed by CRLF');
    const headerEnd = buf.indexOf('\r\n\r\n', at + 2);
    if (headerEnd < 0) throw bad('a part without the blank line after its headers');
    const headers = buf.subarray(at + 2, headerEnd).toString('utf8');
    const next = buf.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), headerEnd + 4);
    if (next < 0) throw bad('a part without its closing boundary');
    const disposition = /^content-disposition:\s*form-data\s*;(.*)$/im.exec(headers)?.[1] ?? '';
    const name = /(?:^|;)\s*name="([^"]*)"/i.exec(disposition)?.[1];
    if (name === undefined) throw bad('a part without Content-Disposition: form-data; name="..."');
    if (parts.has(name)) throw bad(`two parts named ${JSON.stringify(name)}`);
    parts.set(name, { name, filename: /;\s*filename="([^"]*)"/i.exec(disposition)?.[1] ?? null, data: new Uint8Array(buf.subarray(headerEnd + 4, next)) });
    at = next + 2;
  }
}
