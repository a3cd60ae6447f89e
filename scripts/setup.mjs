// Installs what `npm start`, `npm test` and `npm run bench` need on a fresh machine, and nothing when
// it is already there: Debian packages (Chromium for WebGPU in headless tabs, libvulkan for Dawn in
// Node, the Fashion-MNIST data set, redis-server for scale-out tests, coturn for TURN credentials,
// fortunes for language models, python3-requests and python3-numpy for the Python example,
// prometheus for promtool, iproute2 and nftables for the network lab, libnss3-tools for a test CA in
// Chromium, nginx for the reverse proxy's test), npm packages, generated shaders.
import { existsSync, statSync, writeFileSync, readFileSync } from 'node:fs';
import { execSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const debianNeeds = [
  { pkg: 'chromium', path: '/usr/bin/chromium' },
  { pkg: 'libvulkan1', path: '/usr/lib/x86_64-linux-gnu/libvulkan.so.1', alt: '/usr/lib/aarch64-linux-gnu/libvulkan.so.1' },
  { pkg: 'dataset-fashion-mnist', path: '/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz' },
  { pkg: 'redis-server', path: '/usr/bin/redis-server' },
  // coturn, the TURN server: its test checks the credentials the server issues (server/src/testing/coturn.ts).
  { pkg: 'coturn', path: '/usr/bin/turnserver' },
  // English text for language models (fortune-mod's data): packages/data/src/node.ts says why this one.
  { pkg: 'fortunes', path: '/usr/share/games/fortunes/people' },
  // Private CAs and certificates for the https tests (server/src/testing/test-ca.ts).
  { pkg: 'openssl', path: '/usr/bin/openssl' },
  // The Python example (examples/python/) and its test: Debian's python3 with requests and numpy.
  { pkg: 'python3-requests', path: '/usr/lib/python3/dist-packages/requests/__init__.py' },
  { pkg: 'python3-numpy', path: '/usr/lib/python3/dist-packages/numpy/__init__.py' },
  // promtool, which checks the server's /metrics in its test (the Prometheus server itself stays unused).
  { pkg: 'prometheus', path: '/usr/bin/promtool' },
  // The network lab (packages/netlab, root only): ip and tc for namespaces, veth and tbf; nft for its NAT routers.
  { pkg: 'iproute2', path: '/usr/sbin/tc' },
  { pkg: 'nftables', path: '/usr/sbin/nft' },
  // certutil: a test CA in a browser's NSS database (e2e/https-lab.test.ts: the volunteer page over https in the lab).
  { pkg: 'libnss3-tools', path: '/usr/bin/certutil' },
  // The documented reverse proxy (deploy/nginx/tabfleet.conf) and its test in front of a real server (server/test/nginx-proxy.test.ts).
  { pkg: 'nginx', path: '/usr/sbin/nginx' },
];

function run(cmd) {
  console.log(`[setup] ${cmd}`);
  execSync(cmd, { stdio: 'inherit', cwd: root, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

const missing = debianNeeds.filter((n) => !existsSync(n.path) && !(n.alt && existsSync(n.alt))).map((n) => n.pkg);
if (missing.length > 0) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!isRoot) {
    console.error(`[setup] missing Debian packages: ${missing.join(' ')}\n[setup] run: sudo apt-get update && sudo apt-get install -y ${missing.join(' ')}`);
    process.exit(1);
  }
  run('apt-get update -qq');
  run(`apt-get install -y -qq --no-install-recommends ${missing.join(' ')}`);
}

// npm install when node_modules is missing or package-lock.json changed since the last install.
const lock = join(root, 'package-lock.json');
const stamp = join(root, 'node_modules/.tabfleet-setup-stamp');
const lockTime = existsSync(lock) ? String(statSync(lock).mtimeMs) : 'none';
if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== lockTime) {
  run(existsSync(lock) ? 'npm ci --no-audit --no-fund' : 'npm install --no-audit --no-fund');
  writeFileSync(stamp, existsSync(lock) ? String(statSync(lock).mtimeMs) : 'none');
}

await import('./gen-shaders.mjs');
