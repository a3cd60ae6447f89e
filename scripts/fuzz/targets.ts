// Every fuzz target, in the order `npm run fuzz` runs them.
import { EVENT_TARGETS } from './events';
import { FRAME_TARGETS } from './frames';
import { HTTP_TARGETS } from './http-bodies';
import { QUANTIZED_TARGETS } from './quantized';
import { SAFETENSORS_TARGETS } from './safetensors';
import { SPARSE_TARGETS } from './sparse-codec';
import type { FuzzTarget } from './target';
import { WIRE_SIZE_TARGETS } from './wire-size';

export const TARGETS: FuzzTarget[] = [...FRAME_TARGETS, ...SPARSE_TARGETS, ...QUANTIZED_TARGETS, ...SAFETENSORS_TARGETS, ...EVENT_TARGETS, ...WIRE_SIZE_TARGETS, ...HTTP_TARGETS];
