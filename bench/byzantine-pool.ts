// Runs byzantine cells in child processes side by side, one per core (training on the CPU backend is
// single-threaded JS). The waiting cell with the highest priority goes first, in the order queued on
// a tie, so the benchmark decides which cells gate the others (those that choose the worst attacks)
// and which fill the gaps at the end (bench/byzantine.ts).
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { CellResult } from './byzantine-cell';
import type { CellSpec, JobSettings } from './byzantine-config';

export interface CellRequest {
  id: number;
  spec: CellSpec;
  job: JobSettings;
}

export type CellReply = { ready: true } | { id: number; result: CellResult } | { id: number; error: string };

interface Waiting {
  id: number;
  spec: CellSpec;
  priority: number;
  resolve: (r: CellResult) => void;
  reject: (e: Error) => void;
}

const CHILD = fileURLToPath(new URL('./byzantine-child.ts', import.meta.url));

export class CellPool {
  private waiting: Waiting[] = [];
  private idle: ChildProcess[] = [];
  private busy = new Map<ChildProcess, Waiting>();
  private children: ChildProcess[] = [];
  private nextId = 0;
  private closed = false;

  constructor(size: number, private readonly job: JobSettings) {
    for (let i = 0; i < size; i++) this.children.push(this.spawn());
  }

  /** Runs `spec` in the next free child; rejects if the cell throws or its child dies. */
  run(spec: CellSpec, priority: number): Promise<CellResult> {
    if (this.closed) return Promise.reject(new Error('the cell pool is closed'));
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: this.nextId++, spec, priority, resolve, reject });
      this.dispatch();
    });
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiting) w.reject(new Error('the cell pool closed'));
    this.waiting = [];
    for (const c of this.children) c.kill();
  }

  private spawn(): ChildProcess {
    const child = fork(CHILD, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.on('message', (m: CellReply) => {
      if ('ready' in m) {
        this.idle.push(child);
      } else {
        const cell = this.busy.get(child);
        this.busy.delete(child);
        if (cell && 'result' in m) cell.resolve(m.result);
        else cell?.reject(new Error('error' in m ? m.error : 'no result'));
        this.idle.push(child);
      }
      this.dispatch();
    });
    child.on('exit', (code, signal) => {
      this.idle = this.idle.filter((c) => c !== child);
      const cell = this.busy.get(child);
      this.busy.delete(child);
      if (this.closed) return;
      const why = new Error(`a byzantine child process exited (${signal ?? code})`);
      cell?.reject(why);
      // Nobody left to run the waiting cells: fail them rather than hang.
      if (this.children.every((c) => c.exitCode !== null || c.signalCode !== null)) {
        for (const w of this.waiting) w.reject(why);
        this.waiting = [];
      }
    });
    return child;
  }

  private dispatch(): void {
    while (this.idle.length && this.waiting.length) {
      let best = 0;
      for (let i = 1; i < this.waiting.length; i++) if (this.waiting[i].priority > this.waiting[best].priority) best = i;
      const [cell] = this.waiting.splice(best, 1);
      const child = this.idle.shift()!;
      this.busy.set(child, cell);
      child.send({ id: cell.id, spec: cell.spec, job: this.job } satisfies CellRequest);
    }
  }
}
