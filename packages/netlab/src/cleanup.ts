// Everything a lab makes is a namespace named `${lab id}-…`, and removing a namespace removes its
// interfaces, bridge, nftables rules and qdiscs with it. Two things remove them besides close():
// a reaper process started with each lab, which waits for its lab's process to end however it ends
// (exit, a signal, SIGKILL: its stdin pipe closes) and then deletes the lab's namespaces; and a sweep
// when a lab starts, of namespaces left by labs whose process is gone (a reaper killed with them).
import { spawn, type ChildProcess } from 'node:child_process';
import { listNamespaces, runCommand } from './command';

// $1 is the lab id, $2 its folder of files. Processes still inside a namespace keep it alive after
// `ip netns del`, so they go first.
const REAP_SCRIPT = `cat >/dev/null
for ns in $(ip netns list | cut -d' ' -f1 | grep "^$1-"); do
  pids=$(ip netns pids "$ns")
  [ -n "$pids" ] && kill -9 $pids
  ip netns del "$ns"
done
rm -rf "$2"`;

/** Starts the reaper of the lab with this id; close() ends its stdin to run it now. */
export function startReaper(labId: string, dir: string): ChildProcess {
  // Detached: a signal to the test's process group must not take the reaper down before it has cleaned.
  const reaper = spawn('sh', ['-c', REAP_SCRIPT, 'netlab-reaper', labId, dir], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  reaper.unref();
  (reaper.stdin as unknown as { unref(): void }).unref();
  return reaper;
}

/** Runs the reaper now and waits for it. */
export async function runReaper(reaper: ChildProcess): Promise<void> {
  if (reaper.exitCode !== null || reaper.signalCode !== null) return;
  reaper.ref();
  const exited = new Promise<void>((resolve) => reaper.once('exit', () => resolve()));
  reaper.stdin!.end();
  await exited;
}

/** Kills what runs in a namespace and deletes it. */
export async function removeNamespace(ns: string): Promise<void> {
  const { stdout } = await runCommand(['ip', 'netns', 'pids', ns], { allowFailure: true });
  for (const pid of stdout.split(/\s+/).filter(Boolean)) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await runCommand(['ip', 'netns', 'del', ns], { allowFailure: true });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Deletes namespaces `${prefix}-PID-N-…` whose process PID no longer runs: leftovers of labs whose
 * reaper was killed too. Labs of live processes (another test lane) are left alone. Returns the names removed.
 */
export async function sweepLeftovers(prefix: string): Promise<string[]> {
  const pattern = new RegExp(`^${prefix}-(\\d+)-\\d+-`);
  const stale = (await listNamespaces()).filter((ns) => {
    const m = pattern.exec(ns);
    return m !== null && !processAlive(Number(m[1]));
  });
  for (const ns of stale) await removeNamespace(ns);
  return stale;
}
