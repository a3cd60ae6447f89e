// Tiny network probes run inside the lab's namespaces (plain Node, no tsx, so they start fast).
// Each prints one JSON object per line: servers a line per peer they meet, clients their result.
//   udp-echo PORT           answers each datagram with the sender's address:port as it arrived
//   tcp-echo PORT           writes the peer's address:port to each connection and closes it
//   http-echo PORT          answers every HTTP request with the peer's address:port
//   tcp-sink PORT SKIP      receives one upload; its rate over the bytes after the first SKIP
//   tcp-source PORT N       sends N bytes to each connection
//   udp-ask HOST:PORT ...   one socket asks each target until every one has answered
//   tcp-ask HOST:PORT       one connection; what the server saw, or the error
//   tcp-send HOST:PORT N    uploads N bytes
//   tcp-fetch HOST:PORT SKIP  downloads to the end; the rate over the bytes after the first SKIP
import { createSocket } from 'node:dgram';
import { createServer, connect } from 'node:net';
import { createServer as createHttpServer } from 'node:http';

const [mode, ...args] = process.argv.slice(2);
const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
const target = (s) => {
  const i = s.lastIndexOf(':');
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
};

/** Counts what arrives on conn; at its end, says the bytes and the rate over those after the first `skip`. */
function measure(conn, skip, done) {
  let bytes = 0;
  let mark;
  conn.on('data', (chunk) => {
    bytes += chunk.length;
    if (mark === undefined && bytes >= skip) mark = { bytes, at: performance.now() };
  });
  conn.on('end', () => {
    const seconds = (performance.now() - mark.at) / 1000;
    say({ bytes, mbit: ((bytes - mark.bytes) * 8) / seconds / 1e6 });
    conn.end();
    done();
  });
}

/** Writes n bytes to conn as fast as it takes them, then ends it. */
function send(conn, n) {
  const chunk = Buffer.alloc(64 * 1024);
  let left = n;
  const pump = () => {
    while (left > 0) {
      const k = Math.min(left, chunk.length);
      left -= k;
      if (!conn.write(k === chunk.length ? chunk : chunk.subarray(0, k))) return void conn.once('drain', pump);
    }
    conn.end();
  };
  pump();
}

if (mode === 'udp-echo') {
  const sock = createSocket('udp4');
  sock.on('message', (msg, rinfo) => {
    const from = `${rinfo.address}:${rinfo.port}`;
    say({ udp: from });
    sock.send(from, rinfo.port, rinfo.address);
  });
  sock.bind(Number(args[0]), () => say({ listening: Number(args[0]) }));
} else if (mode === 'tcp-echo') {
  createServer((conn) => {
    const from = `${conn.remoteAddress}:${conn.remotePort}`;
    say({ tcp: from });
    conn.end(`${from}\n`);
  }).listen(Number(args[0]), '0.0.0.0', () => say({ listening: Number(args[0]) }));
} else if (mode === 'http-echo') {
  createHttpServer((req, res) => {
    const from = `${req.socket.remoteAddress}:${req.socket.remotePort}`;
    say({ http: from, url: req.url });
    res.setHeader('content-type', 'text/plain');
    res.end(from);
  }).listen(Number(args[0]), '0.0.0.0', () => say({ listening: Number(args[0]) }));
} else if (mode === 'tcp-sink') {
  const server = createServer((conn) => measure(conn, Number(args[1]), () => server.close()));
  server.listen(Number(args[0]), '0.0.0.0', () => say({ listening: Number(args[0]) }));
} else if (mode === 'tcp-source') {
  createServer((conn) => send(conn, Number(args[1]))).listen(Number(args[0]), '0.0.0.0', () => say({ listening: Number(args[0]) }));
} else if (mode === 'tcp-fetch') {
  const conn = connect(target(args[0]));
  measure(conn, Number(args[1]), () => process.exit(0));
  conn.on('error', (err) => {
    say({ error: err.code ?? err.message });
    process.exit(2);
  });
} else if (mode === 'udp-ask') {
  const sock = createSocket('udp4');
  const seen = {};
  sock.on('message', (msg, rinfo) => {
    seen[`${rinfo.address}:${rinfo.port}`] = msg.toString();
    if (Object.keys(seen).length === args.length) {
      say({ local: sock.address().port, seen });
      process.exit(0);
    }
  });
  sock.bind(0, () => {
    const ask = () => args.filter((a) => !(a in seen)).forEach((a) => sock.send('?', target(a).port, target(a).host));
    ask();
    setInterval(ask, 200);
  });
} else if (mode === 'tcp-ask') {
  const conn = connect(target(args[0]));
  let text = '';
  conn.on('data', (d) => (text += d));
  conn.on('end', () => {
    say({ seen: text.trim() });
    process.exit(0);
  });
  conn.on('error', (err) => {
    say({ error: err.code ?? err.message });
    process.exit(2);
  });
} else if (mode === 'tcp-send') {
  const conn = connect(target(args[0]));
  conn.on('connect', () => send(conn, Number(args[1])));
  conn.on('close', () => process.exit(0));
  conn.on('error', (err) => {
    say({ error: err.code ?? err.message });
    process.exit(2);
  });
} else {
  process.stderr.write(`probe: unknown mode ${mode}\n`);
  process.exit(64);
}
