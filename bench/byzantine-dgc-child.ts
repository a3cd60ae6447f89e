// A child process of the DGC-under-CenteredClip measurement (bench/byzantine-dgc.ts): loads
// Fashion-MNIST once, then runs the runs it is sent one at a time on its own CPU backend.
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { CpuBackend } from '@tabfleet/tensor';
import type { JobSettings } from './byzantine-config';
import { runDgcCell, type DgcRun, type DgcRunResult } from './byzantine-dgc';
import { serveTasks } from './child-pool';

const data = await fashionMnistFromDisk();
const backend = new CpuBackend();
serveTasks<{ run: DgcRun; job: JobSettings }, DgcRunResult>(({ run, job }) => runDgcCell(backend, data, run, job));
