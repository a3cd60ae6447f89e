// Static files: the built apps (production), the dataset files, and for browser tests and benchmarks
// the built test pages too. One MIME table and one traversal guard for the server and the tests.
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.gz': 'application/gzip', '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon',
};

export const DATASET_FILES_PREFIX = '/datasets/fashion-mnist/';

/** The file a URL path names under `root` (a directory path gets its index.html), or null when it escapes `root`. */
export function fileUnder(root: string, urlPath: string): string | null {
  const rel = normalize(urlPath).replace(/^(\.\.[/\\])+/, '');
  const file = join(root, rel.endsWith('/') || rel.endsWith(sep) ? `${rel}index.html` : rel);
  return file === root || file.startsWith(root.endsWith(sep) ? root : root + sep) ? file : null;
}

/** A dataset file by its bare name (`train-images-idx3-ubyte.gz`); nothing else is served from there. */
export function datasetFile(datasetsDir: string, name: string): string | null {
  return /^[\w.-]+\.gz$/.test(name) && !name.startsWith('.') ? join(datasetsDir, name) : null;
}

/** Streams `file` with its content type; false when it is not a regular file. */
export function sendFile(res: ServerResponse, file: string): boolean {
  if (!existsSync(file) || !statSync(file).isFile()) return false;
  res.writeHead(200, { 'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size });
  createReadStream(file).pipe(res);
  return true;
}

/** Serves the first of `roots` that holds the path; false when none does. */
export function sendFromRoots(roots: string[], urlPath: string, res: ServerResponse): boolean {
  for (const root of roots) {
    const file = fileUnder(root, urlPath);
    if (file && sendFile(res, file)) return true;
  }
  return false;
}

/**
 * A static server for browser tests and benchmarks: the built test pages and apps, and the dataset
 * files the in-page trainers fetch. No API, no Socket.IO: tests that need those start the real server.
 */
export async function startStaticServer(opts: { roots: string[]; datasetsDir: string; port?: number }): Promise<{ server: Server; url: string }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://local').pathname);
    const dataset = path.startsWith(DATASET_FILES_PREFIX) ? datasetFile(opts.datasetsDir, path.slice(DATASET_FILES_PREFIX.length)) : null;
    if (dataset ? sendFile(res, dataset) : sendFromRoots(opts.roots, path, res)) return;
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}`);
  });
  await new Promise<void>((r) => server.listen(opts.port ?? 0, '127.0.0.1', r));
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('static server has no TCP address');
  return { server, url: `http://127.0.0.1:${addr.port}` };
}
