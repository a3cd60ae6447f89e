export { NetLab, Home, type LabHost, type HomeOptions, type NetLabOptions } from './lab';
export { type NatKind, type RouterCounter, ROUTER_COUNTERS } from './router';
export { runCommand, listNamespaces, type CommandResult, type RunOptions } from './command';
