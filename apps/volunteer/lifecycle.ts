// What the browser does to a page behind the volunteer's back, and what the tab does about it.
// Hidden (a background tab): keep working and say so (the worker table shows it); the browser may
// throttle its timers or freeze it. Frozen (`freeze`): leave the job at once, rejoin on `resume`. On
// battery (the Battery Status API, where the browser has it): leave the job unless the volunteer
// allows it, rejoin when plugged in, as BOINC does by default. A lost GPU device is main.ts's (the
// engine worker reports it); leaving the page is too (`pagehide`).
import type { HoldReason, RuntimeStatus, VolunteerRuntime } from '@tabfleet/worker/runtime';

interface BatteryManager extends EventTarget {
  charging: boolean;
}

/** What the page says while the tab is out of its job, by the hold that matters most. */
export const HOLD_HEADLINES: [HoldReason, string][] = [
  ['gpu lost', 'The GPU was reset: recreating the device, then rejoining the job…'],
  ['frozen', 'The browser froze this tab: it left the job and rejoins when the tab runs again.'],
  ['on battery', 'Paused while this device runs on battery: it rejoins when plugged in (or allow battery power above).'],
  ['paused', 'Paused. Nothing is running.'],
];

export function holdHeadline(s: RuntimeStatus): string | null {
  return HOLD_HEADLINES.find(([reason]) => s.held.includes(reason))?.[1] ?? null;
}

/** Wires the page's lifecycle events to the runtime `current()` returns (null before Contribute). */
export function followLifecycle(current: () => VolunteerRuntime | null, allowBattery: () => boolean): { apply(): void } {
  let battery: BatteryManager | null = null;
  const apply = () => {
    const runtime = current();
    if (!runtime) return;
    runtime.setHidden(document.visibilityState === 'hidden');
    if (battery && !battery.charging && !allowBattery()) void runtime.hold('on battery', 'the device went on battery power');
    else runtime.release('on battery');
  };
  document.addEventListener('visibilitychange', apply);
  document.addEventListener('freeze', () => void current()?.hold('frozen', 'the browser froze the tab'));
  document.addEventListener('resume', () => current()?.release('frozen'));
  const getBattery = (navigator as Navigator & { getBattery?: () => Promise<BatteryManager> }).getBattery;
  void getBattery?.call(navigator).then(
    (b) => {
      battery = b;
      b.addEventListener('chargingchange', apply);
      apply();
    },
    () => {}, // refused (a permissions policy): treat the device as plugged in
  );
  return { apply };
}
