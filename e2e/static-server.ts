// A small static server for the built pages and the Fashion-MNIST files, used by browser tests and
// the single-tab `npm start` until the coordinator serves them.
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { distDir } from './build';

export const FASHION_MNIST_DIR = process.env.FASHION_MNIST_DIR ?? '/usr/share/datasets/fashion-mnist';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.gz': 'application/gzip', '.svg': 'image/svg+xml', '.png': 'image/png',
};

function resolveFile(urlPath: string): string | null {
  const path = decodeURIComponent(urlPath.split('?')[0]);
  if (path.startsWith('/datasets/fashion-mnist/')) {
    const name = path.slice('/datasets/fashion-mnist/'.length);
    return /^[\w.-]+\.gz$/.test(name) ? join(FASHION_MNIST_DIR, name) : null;
  }
  const rel = normalize(path).replace(/^(\.\.[/\\])+/, '');
  const file = join(distDir, rel.endsWith('/') ? `${rel}index.html` : rel);
  return file.startsWith(distDir) ? file : null;
}

export async function startStaticServer(port = 0): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const file = resolveFile(req.url ?? '/');
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('static server has no TCP address');
  return { server, url: `http://127.0.0.1:${addr.port}` };
}
