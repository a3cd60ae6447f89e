// The HTTP API as an OpenAPI 3.1 document, generated from the zod schemas the server validates with
// (zod 4's own JSON Schema output) and the route descriptions of api-description.ts; served at
// /api/openapi.json. `routeCoverage` says which routes of the router the document misses, and which
// of its paths the router lacks.
import { creditRequestSchema, ERROR_CODES, jobSpecSchema, PROTOCOL_VERSION, type ErrorCode } from '@tabfleet/protocol';
import { z } from 'zod';
import { errorBody } from './api-bodies';
import { ROUTE_DOCS, type Content, type ParamDoc, type RouteAuth, type RouteDoc } from './api-description';
import { STATUS } from './respond';

type Json = Record<string, unknown>;

const REF_PREFIX = '#/components/schemas/';

/** Points zod's `#/$defs/X` references at the document's components. */
function toComponentRefs<T>(value: T): T {
  if (Array.isArray(value)) return value.map(toComponentRefs) as T;
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' ? v.replace('#/$defs/', REF_PREFIX) : toComponentRefs(v)])) as T;
}

/**
 * A zod schema as JSON Schema: what a request may send (`input`: defaults optional) or what a
 * response holds (`output`). Schemas with an id (`.meta({ id })`) become references, and their
 * definitions are gathered into `components` (a request's for a named request body).
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output', components: Map<string, Json>): Json {
  const { $schema: _, $defs, ...rest } = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as Json & { $defs?: Record<string, Json> };
  for (const [id, def] of Object.entries($defs ?? {})) {
    // A response's job spec is the spec as sent with every default filled in: its request form
    // (an output of a transform has no JSON Schema of its own).
    if (io === 'input' || !components.has(id)) components.set(id, toComponentRefs(def));
  }
  return toComponentRefs(rest);
}

function contentOf(content: Content, io: 'input' | 'output', components: Map<string, Json>): Json {
  return Object.fromEntries(Object.entries(content).map(([type, schema]) => [
    type,
    { schema: schema === 'binary' ? { type: 'string', contentMediaType: type } : schema === 'text' ? { type: 'string' } : jsonSchema(schema, io, components) },
  ]));
}

const SECURITY: Record<RouteAuth, Json[]> = {
  public: [],
  researcher: [{ researcherToken: [] }],
  ticket: [{ ticket: [] }, { researcherToken: [] }],
  upload: [{ uploadToken: [] }],
};

/** The refusals of a route, one response per status, each naming its codes. */
function errorResponses(doc: RouteDoc): Record<string, Json> {
  const codes = new Set<ErrorCode>([...doc.errors, ...(doc.auth === 'public' ? [] : ['unauthorized' as const]), 'internal']);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of ERROR_CODES.filter((c) => codes.has(c))) byStatus.set(STATUS[code], [...(byStatus.get(STATUS[code]) ?? []), code]);
  return Object.fromEntries([...byStatus].sort(([a], [b]) => a - b).map(([status, list]) => [String(status), {
    description: `error code ${list.join(' or ')}`,
    content: { 'application/json': { schema: { $ref: `${REF_PREFIX}Error` } } },
  }]));
}

function parameter(name: string, where: 'path' | 'query', p: ParamDoc, components: Map<string, Json>): Json {
  return { name, in: where, required: where === 'path' || !!p.required, description: p.description, schema: jsonSchema(p.schema, 'input', components), example: p.example };
}

function operation(doc: RouteDoc, components: Map<string, Json>): Json {
  const parameters = [
    ...Object.entries(doc.params ?? {}).map(([name, p]) => parameter(name, 'path', p, components)),
    ...Object.entries(doc.query ?? {}).map(([name, p]) => parameter(name, 'query', p, components)),
  ];
  const headers = doc.ok.headers && Object.fromEntries(Object.entries(doc.ok.headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }]));
  return {
    operationId: `${doc.method.toLowerCase()}${doc.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase())}`,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    security: SECURITY[doc.auth],
    ...(parameters.length ? { parameters } : {}),
    ...(doc.body ? { requestBody: { required: true, description: doc.body.description, content: contentOf(doc.body.content, 'input', components) } } : {}),
    responses: {
      [String(doc.ok.status)]: { description: doc.ok.description, content: contentOf(doc.ok.content, 'output', components), ...(headers ? { headers } : {}) },
      ...errorResponses(doc),
    },
  };
}

/** The OpenAPI 3.1 document of `docs` (by default, every route of this server). */
export function openApiDocument(docs: readonly RouteDoc[] = ROUTE_DOCS): Json {
  const components = new Map<string, Json>();
  // Request bodies first: what a response repeats of them (a job's spec) refers to their request form.
  for (const body of [jobSpecSchema, creditRequestSchema]) jsonSchema(body, 'input', components);
  jsonSchema(errorBody, 'output', components);
  const paths: Record<string, Record<string, Json>> = {};
  for (const doc of docs) (paths[doc.path] ??= {})[doc.method.toLowerCase()] = operation(doc, components);
  return {
    openapi: '3.1.0',
    info: {
      title: 'tabfleet HTTP API',
      version: String(PROTOCOL_VERSION),
      description: 'Researchers create and watch jobs, upload data and download checkpoints with the token the server prints when it starts; '
        + 'volunteers download their models and shards with the tickets their assignments carry. Training itself runs over Socket.IO (docs/protocol.md).',
    },
    paths,
    components: {
      schemas: Object.fromEntries([...components].sort(([a], [b]) => a.localeCompare(b))),
      securitySchemes: {
        researcherToken: { type: 'http', scheme: 'bearer', description: 'the researcher token (printed by the server at start, or TABFLEET_TOKEN)' },
        ticket: { type: 'apiKey', in: 'query', name: 'ticket', description: 'a ticket from a volunteer\'s assignment, with the job\'s id in `job`' },
        uploadToken: { type: 'http', scheme: 'bearer', description: 'the token of one checkpoint upload, handed to the round\'s uploader in the ack of `checkpoint:upload`' },
      },
    },
  };
}

/** A route as the router matches it: a method and a path pattern. */
export interface RoutePattern {
  method: string;
  pattern: RegExp;
}

/** A documented path with each `{param}` replaced by its example. */
function examplePath(path: string, params: Record<string, { example?: unknown }>): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (params[name]?.example === undefined) throw new Error(`${path}: no example for {${name}}`);
    return encodeURIComponent(String(params[name].example));
  });
}

/**
 * What a document and a router disagree on. Each documented operation's path, filled in with its
 * parameters' examples, must reach a route of the same method (the first whose pattern matches, as
 * the router picks), and every route must be reached by some documented operation.
 */
export function routeCoverage(routes: readonly RoutePattern[], document: Json): { undocumented: string[]; unrouted: string[] } {
  const reached = new Set<RoutePattern>();
  const unrouted: string[] = [];
  for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      const params = Object.fromEntries(((op.parameters ?? []) as { name: string; in: string; example?: unknown }[]).filter((p) => p.in === 'path').map((p) => [p.name, p]));
      const concrete = examplePath(path, params);
      const route = routes.find((r) => r.method === method.toUpperCase() && r.pattern.test(concrete));
      if (route) reached.add(route);
      else unrouted.push(`${method.toUpperCase()} ${path}`);
    }
  }
  const undocumented = routes.filter((r) => !reached.has(r)).map((r) => `${r.method} ${r.pattern.source}`);
  return { undocumented, unrouted };
}
