// A child process of the byzantine benchmark (bench/byzantine-pool.ts forks it): loads Fashion-MNIST
// once, then runs the cells it is sent one at a time on its own CPU backend and sends back each result.
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { CpuBackend } from '@tabfleet/tensor';
import { runCell } from './byzantine-cell';
import type { CellRequest, CellReply } from './byzantine-pool';

const data = await fashionMnistFromDisk();
const backend = new CpuBackend();
const send = (reply: CellReply) => process.send!(reply);

process.on('message', async ({ id, spec, job }: CellRequest) => {
  try {
    send({ id, result: await runCell(backend, data, spec, job) });
  } catch (e) {
    send({ id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) });
  }
});
send({ ready: true });
