// A child process of the byzantine benchmark (bench/child-pool.ts forks it): loads Fashion-MNIST
// once, then runs the cells it is sent one at a time on its own CPU backend and sends back each result.
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { CpuBackend } from '@tabfleet/tensor';
import { runCell, type CellResult } from './byzantine-cell';
import type { CellSpec, JobSettings } from './byzantine-config';
import { serveTasks } from './child-pool';

export type CellTask = { spec: CellSpec; job: JobSettings };

const data = await fashionMnistFromDisk();
const backend = new CpuBackend();
serveTasks<CellTask, CellResult>(({ spec, job }) => runCell(backend, data, spec, job));
