// Runs a benchmark's tasks in child processes side by side, one per core (training on the CPU
// backend is single-threaded JS). The waiting task with the highest priority goes first, in the order
// queued on a tie, so a benchmark decides which tasks gate the others and which fill the gaps at the
// end. A child (e.g. bench/byzantine-child.ts) answers `serveTasks`' protocol.
import { fork, type ChildProcess } from 'node:child_process';

type Request<T> = { id: number; task: T };
type Reply<R> = { ready: true } | { id: number; result: R } | { id: number; error: string };

interface Waiting<T, R> {
  id: number;
  task: T;
  priority: number;
  resolve: (r: R) => void;
  reject: (e: Error) => void;
}

export class ChildPool<T, R> {
  private waiting: Waiting<T, R>[] = [];
  private idle: ChildProcess[] = [];
  private busy = new Map<ChildProcess, Waiting<T, R>>();
  private children: ChildProcess[] = [];
  private nextId = 0;
  private closed = false;

  /** `childPath`: the child's module (run with tsx). */
  constructor(private readonly childPath: string, size: number) {
    for (let i = 0; i < size; i++) this.children.push(this.spawn());
  }

  /** Runs `task` in the next free child; rejects if the task throws or its child dies. */
  run(task: T, priority = 0): Promise<R> {
    if (this.closed) return Promise.reject(new Error('the child pool is closed'));
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: this.nextId++, task, priority, resolve, reject });
      this.dispatch();
    });
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiting) w.reject(new Error('the child pool closed'));
    this.waiting = [];
    for (const c of this.children) c.kill();
  }

  private spawn(): ChildProcess {
    const child = fork(this.childPath, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.on('message', (m: Reply<R>) => {
      if ('ready' in m) {
        this.idle.push(child);
      } else {
        const task = this.busy.get(child);
        this.busy.delete(child);
        if (task && 'result' in m) task.resolve(m.result);
        else task?.reject(new Error('error' in m ? m.error : 'no result'));
        this.idle.push(child);
      }
      this.dispatch();
    });
    child.on('exit', (code, signal) => {
      this.idle = this.idle.filter((c) => c !== child);
      const task = this.busy.get(child);
      this.busy.delete(child);
      if (this.closed) return;
      const why = new Error(`a child process exited (${signal ?? code}): ${this.childPath}`);
      task?.reject(why);
      // Nobody left to run the waiting tasks: fail them rather than hang.
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
      const [w] = this.waiting.splice(best, 1);
      const child = this.idle.shift()!;
      this.busy.set(child, w);
      child.send({ id: w.id, task: w.task } satisfies Request<T>);
    }
  }
}

/** The child's side: runs each task it is sent with `handle`, one at a time, and replies. */
export function serveTasks<T, R>(handle: (task: T) => Promise<R>): void {
  const send = (reply: Reply<R>) => process.send!(reply);
  process.on('message', async ({ id, task }: Request<T>) => {
    try {
      send({ id, result: await handle(task) });
    } catch (e) {
      send({ id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) });
    }
  });
  send({ ready: true });
}
