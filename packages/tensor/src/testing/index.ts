export * from './compare';
export * from './kernel-cases';
