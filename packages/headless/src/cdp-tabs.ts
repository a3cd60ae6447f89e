// Real browser tabs driven over raw CDP, for what Playwright's pages cannot show: Playwright emulates
// focus on the pages it manages, which keeps them visible and makes a CDP freeze a no-op. Tabs made
// here share one window per context, as a volunteer's do: opening a second tab hides the first (a real
// visibilitychange), `Page.setWebLifecycleState` freezes a hidden tab (real `freeze` and `resume`
// events, its timers stopped), and bringing a tab to the front shows it again.
import type { Browser } from 'playwright-core';

export interface CdpTab {
  readonly targetId: string;
  /** A JavaScript expression's value (awaited when it is a promise); a thrown error rejects. */
  evaluate<T = unknown>(expression: string): Promise<T>;
  /** Any CDP command on this tab's page session. */
  send(method: string, params?: object): Promise<Record<string, unknown>>;
  /** `frozen` (the tab must be hidden) or `active`. */
  setLifecycleState(state: 'frozen' | 'active'): Promise<void>;
  bringToFront(): Promise<void>;
  /** Closes the tab as a user would: the page gets its `pagehide`. */
  close(): Promise<void>;
}

export interface CdpWindow {
  /** Opens a tab in this window (it becomes the visible one); `initScript` runs before the page's own scripts. */
  open(url: string, opts?: { initScript?: string; log?: (line: string) => void }): Promise<CdpTab>;
  close(): Promise<void>;
}

/** A fresh browser context (its own storage) whose tabs share one window. */
export async function openCdpWindow(browser: Browser): Promise<CdpWindow> {
  const session = await browser.newBrowserCDPSession();
  const pending = new Map<number, { resolve(v: Record<string, unknown>): void; reject(e: Error): void }>();
  const listeners = new Map<string, (method: string, params: Record<string, unknown>) => void>();
  let nextId = 1;
  session.on('Target.receivedMessageFromTarget', (e: { sessionId: string; message: string }) => {
    const m = JSON.parse(e.message) as { id?: number; result?: Record<string, unknown>; error?: { message: string }; method?: string; params?: Record<string, unknown> };
    if (m.id !== undefined) {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.error) p?.reject(new Error(m.error.message));
      else p?.resolve(m.result ?? {});
    } else if (m.method) listeners.get(e.sessionId)?.(m.method, m.params ?? {});
  });
  const { browserContextId } = (await session.send('Target.createBrowserContext', {})) as { browserContextId: string };

  return {
    async open(url, opts = {}) {
      const { targetId } = (await session.send('Target.createTarget', { url: 'about:blank', browserContextId })) as { targetId: string };
      const { sessionId } = (await session.send('Target.attachToTarget', { targetId, flatten: false })) as { sessionId: string };
      const send = (method: string, params: object = {}) =>
        new Promise<Record<string, unknown>>((resolve, reject) => {
          const id = nextId++;
          pending.set(id, { resolve, reject });
          session.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method, params }) }).catch(reject);
        });
      if (opts.log) {
        listeners.set(sessionId, (method, params) => {
          if (method !== 'Runtime.consoleAPICalled') return;
          const args = (params.args as { value?: unknown; description?: string }[]).map((a) => a.value ?? a.description ?? '');
          opts.log!(`[tab ${params.type}] ${args.join(' ')}`);
        });
        await send('Runtime.enable');
      }
      if (opts.initScript) await send('Page.addScriptToEvaluateOnNewDocument', { source: opts.initScript });
      await send('Page.enable');
      const loaded = new Promise<void>((resolve) => {
        const previous = listeners.get(sessionId);
        listeners.set(sessionId, (method, params) => {
          previous?.(method, params);
          if (method === 'Page.loadEventFired') resolve();
        });
      });
      await send('Page.navigate', { url });
      await loaded;
      return {
        targetId,
        send,
        async evaluate<T>(expression: string): Promise<T> {
          const r = (await send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true })) as {
            result: { value?: T };
            exceptionDetails?: { exception?: { description?: string }; text: string };
          };
          if (r.exceptionDetails) throw new Error(`in the tab: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
          return r.result.value as T;
        },
        async setLifecycleState(state) {
          await send('Page.setWebLifecycleState', { state });
        },
        async bringToFront() {
          await send('Page.bringToFront');
        },
        async close() {
          await session.send('Target.closeTarget', { targetId });
          listeners.delete(sessionId);
        },
      };
    },
    async close() {
      await session.send('Target.disposeBrowserContext', { browserContextId }).catch(() => {});
      await session.detach().catch(() => {});
    },
  };
}
