export * from './dgc';
export * from './sparsity';
export * from './engine';
export * from './strategies';
export * from './exchange';
export * from './simulate';
export * from './workers';
export * from './convergence';
