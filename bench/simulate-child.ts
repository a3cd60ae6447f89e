// A child process of `npm run simulate` (bench/child-pool.ts forks it): runs the scenarios it is sent
// one at a time through the simulator and sends back each result (the untrusted section's seeds run
// side by side, one child each).
import { serveTasks } from './child-pool';
import { simulate, type Scenario } from './simulator';

serveTasks((s: Scenario) => simulate(s));
