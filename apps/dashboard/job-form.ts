// The new-job form: what most researchers set first (model, data, target, volunteers), the rest folded
// under "advanced", each field with its default for the choices made so far; validated with the same
// schema the server uses before it is posted, and the model's size and GPU memory shown as it is typed.
import { TEXT_DATASETS, jobSpecSchema, layoutOf, parameterCount, type JobSummary } from '@tabfleet/protocol';
import { $, esc } from '../shared/dom';
import { formatBytes } from '../shared/format';
import { formDefaults } from './job-defaults';
import { memoryLine } from './model-memory';
import { showUploadChoice } from './uploads';

/** Top-level number fields, sent only when filled in. */
const NUMBER_FIELDS = [
  'H', 'roundBudgetMs', 'sparsity', 'fragments', 'overlapSteps', 'fragmentMixing', 'minWorkers', 'maxWorkers', 'groupSize', 'targetSteps', 'targetAccuracy',
  'evalEverySteps', 'evalFromStep', 'evalExamples', 'checkpointEvery', 'seed',
] as const;
/** Optional hyperparameters, sent only when filled in. */
const OPTIONAL_HYPERPARAMETERS = ['momentum', 'weightDecay', 'outerLr', 'outerMomentum'] as const;

/** The job spec the form stands for: blank optional fields are left out for the server's defaults. */
export function formSpec(form: HTMLFormElement): Record<string, unknown> {
  const f = new FormData(form);
  const num = (k: string) => (String(f.get(k) ?? '').trim() === '' ? undefined : Number(f.get(k)));
  const hyperparameters: Record<string, unknown> = { lr: num('lr'), batchSize: num('batchSize'), ...(f.get('optimizer') ? { optimizer: f.get('optimizer') } : {}) };
  for (const k of OPTIONAL_HYPERPARAMETERS) if (num(k) !== undefined) hyperparameters[k] = num(k);
  const spec: Record<string, unknown> = {
    preset: f.get('preset'), dataset: f.get('dataset'), strategy: f.get('strategy'), compression: f.get('compression'), trust: f.get('trust') ?? undefined, hyperparameters,
  };
  if (f.get('aggregation')) spec.aggregation = f.get('aggregation');
  if (f.get('pacing')) spec.pacing = f.get('pacing');
  if (f.get('hierarchical')) spec.hierarchical = true;
  if (f.get('regionalGroups')) spec.regionalGroups = true;
  if (spec.dataset === 'text-upload' || spec.dataset === 'image-upload') spec.upload = f.get('upload') || undefined;
  if (spec.preset === 'gpt') spec.gpt = { layers: num('gptLayers'), heads: num('gptHeads'), width: num('gptWidth'), context: num('gptContext') };
  if (f.get('tokenizer') && (TEXT_DATASETS as readonly unknown[]).includes(spec.dataset)) spec.tokenizer = f.get('tokenizer');
  const name = String(f.get('name') ?? '').trim();
  if (name) spec.name = name;
  for (const k of NUMBER_FIELDS) if (num(k) !== undefined) spec[k] = num(k);
  return spec;
}

function showFormErrors(form: HTMLFormElement, issues: { path: string; message: string }[]): void {
  for (const label of form.querySelectorAll('label')) label.classList.remove('invalid');
  for (const i of issues) {
    const field = i.path.split('.').at(-1) ?? '';
    const label = form.querySelector(`[name="${field}"]`)?.closest('label');
    label?.classList.add('invalid');
    // A refused field folded away would be invisible: unfold the section that holds it.
    const folded = label?.closest('details');
    if (folded) folded.open = true;
  }
  $('form-errors').innerHTML = issues.map((i) => `<li>${esc(i.path || 'job')}: ${esc(i.message)}</li>`).join('');
}

/** A field's default as the form starts it: a select's first chosen option, an input's starting value. */
function startingValue(field: Element | null): string | null {
  if (field instanceof HTMLSelectElement) {
    const first = [...field.options].find((o) => o.defaultSelected) ?? field.options[0];
    return first && first.value !== '' ? first.value : null;
  }
  if (field instanceof HTMLInputElement) return field.type === 'checkbox' ? (field.defaultChecked ? 'on' : 'off') : field.defaultValue || null;
  return null;
}

/** Each field's default for the choices made so far, beside it and in a select's "default" option. */
function showDefaults(form: HTMLFormElement, spec: Record<string, unknown>): void {
  const computed = formDefaults(spec);
  for (const span of form.querySelectorAll<HTMLElement>('[data-default-for]')) {
    const name = span.dataset.defaultFor!;
    const field = form.querySelector(`[name="${name}"]`);
    const value = computed[name] ?? span.dataset.defaultText ?? startingValue(field);
    span.textContent = value === null ? '' : `Default: ${value}.`;
    span.dataset.value = value ?? '';
    const blank = field instanceof HTMLSelectElement ? [...field.options].find((o) => o.value === '') : undefined;
    if (blank && computed[name]) blank.textContent = `default (${computed[name]})`;
  }
}

/** The model's size and the GPU memory a tab needs for it as the form stands (or why it cannot run), shown before submitting. */
function showModelSize(form: HTMLFormElement): void {
  const spec = formSpec(form);
  $('gpt-fields').hidden = spec.preset !== 'gpt';
  showUploadChoice(spec.dataset);
  showDefaults(form, spec);
  const parsed = jobSpecSchema.safeParse(spec);
  $('model-memory').textContent = memoryLine(parsed);
  const modelIssue = parsed.success ? null : parsed.error.issues.find((i) => ['gpt', 'tokenizer', 'preset', 'dataset'].includes(String(i.path[0])));
  if (!parsed.success) {
    $('model-size').textContent = modelIssue ? `model: ${modelIssue.message}` : '';
    return;
  }
  const layout = layoutOf(parsed.data);
  $('model-size').textContent = `${parameterCount(layout).toLocaleString('en')} parameters, ${formatBytes(layout.length * 4)} per copy of the model`;
}

export function wireJobForm(api: (path: string, init?: RequestInit) => Promise<Response>, created: (job: JobSummary) => void): void {
  const form = $('job-form') as HTMLFormElement;
  form.addEventListener('input', () => showModelSize(form));
  showModelSize(form);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const spec = formSpec(form);
    const parsed = jobSpecSchema.safeParse(spec);
    if (!parsed.success) return showFormErrors(form, parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })));
    showFormErrors(form, []);
    const res = await api('/api/jobs', { method: 'POST', body: JSON.stringify(spec) });
    const body = await res.json();
    if (!res.ok) return showFormErrors(form, [{ path: '', message: body.error?.message ?? `HTTP ${res.status}` }]);
    created(body.job);
  });
}
