// The internet benchmark's signaling relay, run on a lab public host: WebRTC offers, answers and ICE
// candidates between member processes in homes, over TCP, as the coordinator's `signal` events do in
// production. One JSON object per line: a member's first line is `{"hello": id}`, answered `{"welcome": id}`;
// then `{"to", "data"}` is passed to that member as `{"from", "data"}`. `node --import tsx bench/internet/relay.ts HOST PORT`.
import { createServer, type Socket } from 'node:net';
import { createInterface } from 'node:readline';

const [host, portText] = process.argv.slice(2);
const port = Number(portText);
if (!host || !Number.isInteger(port) || port < 1 || port > 65535) {
  console.error('usage: relay.ts HOST PORT');
  process.exit(2);
}

const members = new Map<string, Socket>();
let relayed = 0;
let dropped = 0;

const server = createServer((socket) => {
  socket.setNoDelay(true);
  let self: string | null = null;
  createInterface({ input: socket }).on('line', (line) => {
    let msg: { hello?: unknown; to?: unknown; data?: unknown };
    try {
      msg = JSON.parse(line);
    } catch {
      socket.destroy();
      return;
    }
    if (self === null) {
      if (typeof msg.hello !== 'string' || msg.hello.length === 0) return void socket.destroy();
      self = msg.hello;
      members.get(self)?.destroy();
      members.set(self, socket);
      socket.write(`${JSON.stringify({ welcome: self })}\n`);
      return;
    }
    const to = typeof msg.to === 'string' ? members.get(msg.to) : undefined;
    if (!to) return void dropped++;
    relayed++;
    to.write(`${JSON.stringify({ from: self, data: msg.data })}\n`);
  });
  socket.on('error', () => {});
  socket.on('close', () => {
    if (self !== null && members.get(self) === socket) members.delete(self);
  });
});
server.listen(port, host, () => console.log(`relay listening on ${host}:${port}`));
process.on('SIGTERM', () => {
  console.log(`relay: ${relayed} messages relayed, ${dropped} for unknown members`);
  process.exit(0);
});
