// Streaming DiLoCo's overlap in a tab (jobs.ts `overlapSteps`): once this sync's payload is taken and
// the tab said it is ready, it trains the next round's first τ steps while the exchange runs, so the
// exchange hides behind them (in the browser the engine's Web Worker trains while the page moves
// bytes). The strategy counts those steps from its payload and merges the synced fragment at the
// commit; the next local work is then H − τ steps. Anything that touches the parameters (the commit,
// a model load) waits for the steps first.
import type { LocalWork } from '@tabfleet/distributed';

export class ExchangeOverlap {
  private running: Promise<LocalWork> | null = null;

  /** Starts `steps` local steps through `local` (the engine's); their work is what `take` gives. */
  start(steps: number, local: (steps: number) => Promise<LocalWork>): void {
    if (this.running) throw new Error('an overlap is already training');
    this.running = local(steps);
    // Awaited by settle() or take(); until then a failure must not surface as an unhandled rejection.
    this.running.catch(() => {});
  }

  /** Waits for steps started (rethrowing their failure); call before the commit or a model load. */
  async settle(): Promise<void> {
    await this.running;
  }

  /** The steps trained ahead (none: null), once: the next local work does H less these. */
  async take(): Promise<LocalWork | null> {
    const running = this.running;
    this.running = null;
    return running ? await running : null;
  }
}
