// A forked process of the coordinator benchmark (the server node or a client of simulated
// volunteers) with a typed IPC inbox; its output is kept (last lines) for error reports.
import { fork, type ChildProcess } from 'node:child_process';
import { setPriority } from 'node:os';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { FromClient, FromServer, ToClient, ToServer } from './messages';

const repoRoot = resolve(import.meta.dirname, '..', '..');

const TSX = ['--import', 'tsx'];

/** A forked process with a typed IPC inbox; its output is kept (last lines) for error reports. */
export class Child<In, Out extends { type: string }> {
  readonly proc: ChildProcess;
  private readonly inbox: Out[] = [];
  private readonly waiters: { type: string; resolve(m: Out): void; reject(e: Error): void }[] = [];
  private readonly tail: string[] = [];
  exited: string | null = null;

  /**
   * With `logFile`, output goes straight to that file: writes to a pipe are synchronous on Linux, so a
   * busy reader (this process) could otherwise stall a chatty child such as the server.
   */
  constructor(readonly name: string, script: string, args: string[], execArgv: string[], private readonly logFile?: string) {
    const fd = logFile ? openSync(logFile, 'a') : null;
    this.proc = fork(join(import.meta.dirname, script), args, {
      cwd: repoRoot, execArgv: [...TSX, ...execArgv], stdio: ['ignore', fd ?? 'pipe', fd ?? 'pipe', 'ipc'],
    });
    if (fd !== null) closeSync(fd);
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line.trim()) this.tail.push(line);
      if (this.tail.length > 40) this.tail.splice(0, this.tail.length - 40);
    };
    this.proc.stdout?.on('data', keep);
    this.proc.stderr?.on('data', keep);
    this.proc.on('message', (m: Out) => {
      const i = this.waiters.findIndex((w) => w.type === m.type);
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(m);
      else if (m.type === 'fatal') this.fail(`${this.name}: ${(m as unknown as { message: string }).message}`);
      else this.inbox.push(m);
    });
    this.proc.on('exit', (code, signal) => this.fail(`${this.name} exited (code ${code}, signal ${signal})`));
    this.proc.on('error', (e) => this.fail(`${this.name}: ${e.message}`));
  }

  /** Runs this process at niceness `nice` (higher: it gets less CPU than the others while the machine is busy). */
  renice(nice: number): void {
    if (nice !== 0 && this.proc.pid !== undefined) setPriority(this.proc.pid, nice);
  }

  private fail(why: string): void {
    this.exited ??= why;
    for (const w of this.waiters.splice(0)) w.reject(new Error(`${why}\n${this.output()}`));
  }

  output(): string {
    let lines = this.tail;
    if (this.logFile) {
      try {
        lines = readFileSync(this.logFile, 'utf8').split('\n').filter((l) => l.trim()).slice(-40);
      } catch {
        lines = [];
      }
    }
    return lines.map((l) => `  | ${l}`).join('\n');
  }

  send(m: In): void {
    if (!this.exited) this.proc.send(m as object);
  }

  next<T extends Out['type']>(type: T, timeoutMs: number): Promise<Extract<Out, { type: T }>> {
    const i = this.inbox.findIndex((m) => m.type === type);
    if (i >= 0) return Promise.resolve(this.inbox.splice(i, 1)[0] as Extract<Out, { type: T }>);
    if (this.exited) return Promise.reject(new Error(`${this.exited}\n${this.output()}`));
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        const k = this.waiters.indexOf(w);
        if (k >= 0) this.waiters.splice(k, 1);
        reject(new Error(`${this.name}: no "${type}" within ${timeoutMs} ms\n${this.output()}`));
      }, timeoutMs);
      const w = {
        type,
        resolve: (m: Out) => {
          clearTimeout(timer);
          resolvePromise(m as Extract<Out, { type: T }>);
        },
        reject: (e: Error) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.waiters.push(w);
    });
  }

  kill(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
  }

  /** Resolves once the process has exited (killing it after `graceMs`). */
  async stopped(graceMs: number): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    await new Promise<void>((r) => {
      const t = setTimeout(() => {
        this.kill();
        r();
      }, graceMs);
      this.proc.once('exit', () => {
        clearTimeout(t);
        r();
      });
    });
  }
}


export type ServerChild = Child<ToServer, FromServer>;
export type ClientChild = Child<ToClient, FromClient> & { load: number };
