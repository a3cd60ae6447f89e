// The HTTP API reference: reads the server's OpenAPI document (/api/openapi.json) and lists every
// route with its method, path, who may call it and what it does; each route opens onto its
// parameters, request body and answers, and named schemas open onto their fields.
import { $, esc } from '../shared/dom';

/** The parts of an OpenAPI 3.1 document this page shows. */
interface Schema {
  $ref?: string;
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  additionalProperties?: boolean | Schema;
  contentMediaType?: string;
}
interface Parameter { name: string; in: string; required?: boolean; description?: string; schema?: Schema }
interface Media { schema?: Schema }
interface Operation {
  summary?: string;
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: Parameter[];
  requestBody?: { description?: string; content: Record<string, Media> };
  responses: Record<string, { description: string; content?: Record<string, Media>; headers?: Record<string, { description?: string }> }>;
}
interface OpenApiDocument {
  info: { title: string; version: string; description?: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema>; securitySchemes?: Record<string, { description?: string }> };
}

/** Who may call an operation, in words, from its security requirements. */
export function authOf(op: Operation): { kind: 'public' | 'researcher' | 'ticket'; label: string } {
  const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
  if (!schemes.length) return { kind: 'public', label: 'public' };
  if (schemes.includes('ticket')) return { kind: 'ticket', label: 'ticket or researcher token' };
  return { kind: 'researcher', label: 'researcher token' };
}

const refName = (ref: string) => ref.replace('#/components/schemas/', '');

/** The document's named schemas, once read. */
let named: Record<string, Schema> = {};
/** A body's schema with a reference to a named one taken in, so its fields show where the body is. */
const inlined = (s: Schema): Schema => (s.$ref && named[refName(s.$ref)] ? { ...named[refName(s.$ref)] } : s);

/** A schema's type in a few characters: `string`, `integer | null`, `array of MetricPoint`, `one of …`. */
function typeOf(s: Schema): string {
  if (s.$ref) return `<a href="#schema-${esc(refName(s.$ref))}">${esc(refName(s.$ref))}</a>`;
  if (s.const !== undefined) return esc(JSON.stringify(s.const));
  if (s.enum) return s.enum.map((v) => esc(JSON.stringify(v))).join(' | ');
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives) return alternatives.map(typeOf).join(' | ');
  if (s.allOf) return s.allOf.map(typeOf).join(' & ');
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (types.includes('array') && s.items) return `array of ${typeOf(s.items)}`;
  if (s.contentMediaType) return `bytes (${esc(s.contentMediaType)})`;
  return esc(types.join(' | ') || 'any');
}

/** Bounds, pattern and default of a value, as short text. */
function constraintsOf(s: Schema): string {
  const parts: string[] = [];
  if (s.minimum !== undefined && s.minimum > -Number.MAX_SAFE_INTEGER) parts.push(`≥ ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) parts.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined && s.maximum < Number.MAX_SAFE_INTEGER) parts.push(`≤ ${s.maximum}`);
  if (s.minLength !== undefined) parts.push(`length ≥ ${s.minLength}`);
  if (s.maxLength !== undefined) parts.push(`length ≤ ${s.maxLength}`);
  if (s.pattern) parts.push(`matches ${s.pattern}`);
  if (s.default !== undefined) parts.push(`default ${JSON.stringify(s.default)}`);
  return parts.length ? ` <span class="muted">(${esc(parts.join(', '))})</span>` : '';
}

/** A schema as a nested list of its fields (objects, arrays of them, alternatives among them) or one line. */
export function schemaHtml(s: Schema): string {
  const about = `${constraintsOf(s)}${s.description ? ` — ${esc(s.description)}` : ''}`;
  if (s.properties) {
    const required = new Set(s.required ?? []);
    const fields = Object.entries(s.properties).map(([name, field]) => `<li data-field="${esc(name)}"><code>${esc(name)}</code>`
      + `${required.has(name) ? ' <span class="required">required</span>' : ''}: ${schemaHtml(field)}</li>`);
    return `<span class="type">object</span>${about}<ul class="schema">${fields.join('')}</ul>`;
  }
  const isArray = s.type === 'array' || (Array.isArray(s.type) && s.type.includes('array'));
  if (isArray && s.items?.properties) return `<span class="type">array of</span>${about} ${schemaHtml(s.items)}`;
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives?.some((a) => a.properties)) return `<span class="type">one of</span>${about}<ul class="schema">${alternatives.map((a) => `<li>${schemaHtml(a)}</li>`).join('')}</ul>`;
  return `<span class="type">${typeOf(s)}</span>${about}`;
}

function mediaHtml(content: Record<string, Media> | undefined): string {
  return Object.entries(content ?? {}).map(([type, m]) => `<details class="media"><summary><code>${esc(type)}</code>: ${m.schema ? typeOf(m.schema) : ''}</summary>`
    + `<div>${m.schema ? schemaHtml(inlined(m.schema)) : ''}</div></details>`).join('');
}

function parametersHtml(params: Parameter[]): string {
  if (!params.length) return '';
  const rows = params.map((p) => `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}${p.required ? ' <span class="required">required</span>' : ''}</td>`
    + `<td>${p.schema ? typeOf(p.schema) + constraintsOf(p.schema) : ''}</td><td>${esc(p.description ?? '')}</td></tr>`);
  return `<h4>Parameters</h4><table class="grid params"><tbody>${rows.join('')}</tbody></table>`;
}

function operationHtml(method: string, path: string, op: Operation): string {
  const auth = authOf(op);
  const responses = Object.entries(op.responses).map(([status, r]) => `<li data-status="${esc(status)}"><strong>${esc(status)}</strong> ${esc(r.description)}`
    + `${Object.entries(r.headers ?? {}).map(([h, d]) => ` <span class="muted">(header <code>${esc(h)}</code>: ${esc(d.description ?? '')})</span>`).join('')}`
    + `${status.startsWith('2') ? mediaHtml(r.content) : ''}</li>`);
  return `<details class="route" data-method="${esc(method.toUpperCase())}" data-path="${esc(path)}" data-auth="${auth.kind}">
    <summary><span class="method method-${esc(method)}">${esc(method.toUpperCase())}</span> <span class="path">${esc(path)}</span>
      <span class="auth auth-${auth.kind}">${esc(auth.label)}</span> <span class="summary">${esc(op.summary ?? '')}</span></summary>
    <div>${op.description ? `<p>${esc(op.description)}</p>` : ''}${parametersHtml(op.parameters ?? [])}
      ${op.requestBody ? `<h4>Request body</h4><p class="muted">${esc(op.requestBody.description ?? '')}</p>${mediaHtml(op.requestBody.content)}` : ''}
      <h4>Answers</h4><ul class="responses">${responses.join('')}</ul></div></details>`;
}

async function show(): Promise<void> {
  const res = await fetch('/api/openapi.json');
  if (!res.ok) throw new Error(`GET /api/openapi.json: HTTP ${res.status}`);
  const doc = (await res.json()) as OpenApiDocument;
  named = doc.components?.schemas ?? {};
  $('api-title').textContent = `${doc.info.title}, version ${doc.info.version}. ${doc.info.description ?? ''}`;
  $('auth').querySelector('tbody')!.innerHTML = Object.entries(doc.components?.securitySchemes ?? {})
    .map(([name, s]) => `<tr><td>${esc(name)}</td><td>${esc(s.description ?? '')}</td></tr>`).join('');
  $('routes').innerHTML = Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => operationHtml(method, path, op))).join('');
  $('routes').setAttribute('aria-busy', 'false');
  $('schemas').innerHTML = Object.entries(doc.components?.schemas ?? {})
    .map(([name, s]) => `<details class="schema" id="schema-${esc(name)}"><summary><code>${esc(name)}</code></summary><div>${schemaHtml(s)}</div></details>`).join('');
}

// A link to a named schema opens it.
addEventListener('hashchange', () => {
  const target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (target instanceof HTMLDetailsElement) target.open = true;
});

show().catch((e: Error) => {
  $('api-error').hidden = false;
  $('api-error').textContent = `Could not read the API document: ${e.message}`;
});
