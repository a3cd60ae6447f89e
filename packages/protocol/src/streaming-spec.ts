// What a job spec may ask of Streaming DiLoCo (fragments, overlapSteps, fragmentMixing), checked
// where the spec is parsed (jobs.ts): each refusal says why and what to use instead.
import type { ParamLayout } from './layout';
import { fragmentUnits } from './streaming';

interface StreamingFields {
  strategy: string;
  compression: string;
  trust: string;
  pacing?: string;
  H: number;
  fragments: number;
  overlapSteps: number;
  fragmentMixing?: number;
  groupSize?: number;
}

/** A job streams when it cuts its model into fragments or overlaps a sync with the next steps. */
export const isStreaming = (s: { fragments: number; overlapSteps: number }) => s.fragments > 1 || s.overlapSteps > 0;

/**
 * The spec's Streaming DiLoCo issues (path and message), none when it does not stream or streams
 * soundly. `layout` gives the job's model, asked only of a streaming spec (null where the spec's model
 * fields are wrong themselves: their checks say so).
 */
export function streamingIssues(s: StreamingFields & { layout: () => ParamLayout | null }): { path: string[]; message: string }[] {
  const issues: { path: string[]; message: string }[] = [];
  const add = (field: string, message: string) => issues.push({ path: [field], message });
  if (s.fragmentMixing !== undefined && s.fragmentMixing !== 0 && s.overlapSteps === 0) add('fragmentMixing', 'fragmentMixing merges a fragment that arrives during later steps: set overlapSteps');
  if (!isStreaming(s)) return issues;
  if (s.strategy !== 'diloco') {
    add('strategy', `Streaming DiLoCo (fragments, overlapSteps) syncs DiLoCo's outer step a fragment at a time: strategy must be diloco, not ${s.strategy}`);
    return issues;
  }
  if (s.compression === 'dgc') {
    add('compression', 'DGC picks its entries from the whole model; a streaming sync sends one fragment dense or block-quantized: compression none, fp16, int8 or e2m1');
  }
  if (s.trust !== 'trusted') {
    add('trust', 'an untrusted job\'s checks replay a sync\'s work from the agreed model, and a streaming member\'s other fragments carry '
      + 'local progress from earlier syncs, so its work cannot be replayed: Streaming DiLoCo runs in trusted jobs');
  }
  if (s.pacing !== undefined && s.pacing !== 'fixed') {
    add('pacing', `fragments take turns by the count of syncs of H steps each: a streaming job's pacing is fixed, not ${s.pacing}`);
  }
  if (s.groupSize !== undefined) add('groupSize', 'Moshpit groups average LocalSGD parameters, not DiLoCo fragments');
  if (s.overlapSteps >= s.H) add('overlapSteps', `a fragment must arrive within the next round's ${s.H} steps: overlapSteps below H (${s.H})`);
  const layout = s.layout();
  const units = layout ? fragmentUnits(layout) : null;
  if (units !== null && s.fragments > units) add('fragments', `this model has ${units} blocks and layers to cut: at most ${units} fragments, not ${s.fragments}`);
  return issues;
}
