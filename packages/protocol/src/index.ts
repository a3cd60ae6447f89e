export * from './safetensors';
export * from './limits';
export * from './jobs';
export * from './events';
export * from './frames';
export * from './credit';
export * from './random';
export * from './checksum';
