// What tests, benchmarks and launchers outside the server package use: a real server on a loopback
// port with a fresh data directory, and simulated volunteers that follow the protocol.
export * from './sim-volunteer';
export * from './test-server';
export * from './redis-server';
