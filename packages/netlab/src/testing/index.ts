export { startProbe, askProbe, spawnProbe, waitFor, portOf, addressOf, type ProbeServer } from './probes';
