export * from './idx';
export * from './dataset';
export * from './fashion-mnist';
export * from './synthetic';
export * from './text';
export * from './tokenizers';
export * from './corpus';
export * from './uploads';
