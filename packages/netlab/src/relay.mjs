// Run inside a lab namespace by portal.ts: accepts connections on a Unix socket (which, being a file,
// the root namespace reaches) and joins each to a TCP address inside the namespace.
//   node relay.mjs SOCKET_PATH HOST PORT
import { createServer, connect } from 'node:net';

const [path, host, port] = process.argv.slice(2);
createServer((outside) => {
  const inside = connect({ host, port: Number(port) });
  outside.pipe(inside).pipe(outside);
  const end = () => {
    outside.destroy();
    inside.destroy();
  };
  outside.on('error', end);
  inside.on('error', end);
  outside.on('close', end);
  inside.on('close', end);
}).listen(path, () => process.stdout.write('ready\n'));
