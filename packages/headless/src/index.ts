export * from './build';
export { CHROMIUM_ARGS, CHROMIUM_PATH } from './chromium.mjs';
export * from './session';
export * from './workers';
export * from './cdp-tabs';
