// A Node volunteer as a process of its own, for lab tests that run each volunteer inside a network
// namespace (a host behind a home's NAT): the worker runtime on the CPU backend, its peer links real
// WebRTC (@roamhq/wrtc) gathering candidates through the ICE servers the server hands out.
// `node --import tsx packages/worker/src/testing/volunteer-main.ts SERVER_URL [JOB_ID]`. It prints one
// JSON line per status change ({"status": …}) and its log lines ({"log": …}); SIGTERM stops it.
import { createNodeWebRtcTransport } from '@tabfleet/collective/webrtc-node';
import { nodeVolunteer } from '../testing';

const [serverUrl, jobId] = process.argv.slice(2);
if (!serverUrl || !/^https?:\/\//.test(serverUrl)) {
  console.error('usage: volunteer-main.ts SERVER_URL [JOB_ID]');
  process.exit(2);
}
const print = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const { runtime } = nodeVolunteer(serverUrl, (self, signaler, iceServers) => createNodeWebRtcTransport({
  self, signaler, connectTimeoutMs: 30_000, rtcConfig: () => ({ iceServers: iceServers() }),
}), { jobId, log: (log) => print({ log }), onStatus: (status) => print({ status }) });
const stop = () => {
  runtime.stop();
  setTimeout(() => process.exit(0), 200).unref();
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
