// A process that makes a lab and then ends badly, for cleanup.test.ts: `hold` waits to be killed,
// `throw` is a node:test file whose test throws (its `after` hook closes the lab).
// Run as `node --import tsx lab-child.ts MODE PREFIX`; it prints {"id": …} once the lab is built.
import { after, test } from 'node:test';
import { NetLab } from '../lab';

const [mode, prefix] = process.argv.slice(2);

async function build(): Promise<NetLab> {
  const lab = await NetLab.create({ prefix });
  await lab.publicHost('server');
  const home = await lab.home('h1', { nat: 'symmetric', uplinkMbit: 5 });
  const tab = await home.host('tab1');
  lab.spawn(tab, ['sleep', '600']);
  process.stdout.write(`${JSON.stringify({ id: lab.id })}\n`);
  return lab;
}

if (mode === 'hold') {
  await build();
  setInterval(() => {}, 60_000);
} else if (mode === 'throw') {
  let lab: NetLab | undefined;
  after(() => lab?.close());
  test('a test that throws with a lab open', async () => {
    lab = await build();
    throw new Error('thrown inside the test');
  });
} else {
  throw new Error(`lab-child: unknown mode ${mode}`);
}
