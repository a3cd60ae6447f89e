export * from './params';
export * from './layers';
export * from './models/index';
export * from './optim';
export * from './train';
export * from './generate';
export * from './memory-plan';
