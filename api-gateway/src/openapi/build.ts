// The machinery of the OpenAPI document: the zod registries turned into
// components, and one operation described in a few fields turned into its
// OpenAPI form with the errors every route of its kind shares (the key, the
// rate limit, the JSON body). What each operation is lives in ./document.ts.
import { z } from 'zod';
import { INVALID_KEY, MISSING_KEY } from '../auth.js';
import { BODY_ERRORS, UNAVAILABLE } from '../http-errors.js';
import { NOT_AN_OBJECT } from '@mediajobs/lib/request-body';
import { NOT_JSON } from '../json-body.js';
import { MARKETPLACE_USER_REVOKED } from '../marketplace.js';
import { queryErrors } from '../query.js';
import { RATE_COUNTER_UNAVAILABLE, RATE_LIMITED } from '../rate-limit.js';
import { requests, responses } from './schemas.js';

type Json = Record<string, unknown>;

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

/** zod's JSON Schema output, tidied for a components section: no per-schema $schema/$id, no safe-integer bounds zod adds to every int. */
function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy);
  if (typeof node !== 'object' || node === null) return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === '$schema' || k === '$id') continue;
    if ((k === 'minimum' && v === Number.MIN_SAFE_INTEGER) || (k === 'maximum' && v === Number.MAX_SAFE_INTEGER)) continue;
    out[k] = tidy(v);
  }
  return out;
}

/** Every registered schema as OpenAPI components: request bodies as a client may send them, answers as the service sends them. */
export function componentSchemas(): Json {
  const uri = (id: string) => `#/components/schemas/${id}`;
  const options = { target: 'draft-2020-12', unrepresentable: 'any', uri } as const;
  return {
    ...(tidy(z.toJSONSchema(requests, { ...options, io: 'input' }).schemas) as Json),
    ...(tidy(z.toJSONSchema(responses, { ...options, io: 'output' }).schemas) as Json),
  };
}

/** Who may call an operation: with a key (missing-key message), or anyone (the URL or nothing is the credential). */
export type Access = { key: string } | 'open';
export const KEY: Access = { key: MISSING_KEY };

export interface Operation {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** OpenAPI form: /jobs/{id}. */
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  access: Access;
  /** A request body schema's component id; `optional` for POSTs that take none but read JSON if sent. */
  body?: { schema: string; required: boolean } | 'none-or-json';
  /** Header parameters, in OpenAPI form. */
  parameters?: Json[];
  /** The query schema the route reads (../query.ts): its fields become the query parameters, its checks the 400s. */
  query?: z.ZodObject;
  /** The success answers: status → component id(s) (several: oneOf), or a raw OpenAPI response. */
  ok: Record<number, string | string[] | Json>;
  /** Error statuses with their exact messages (each an example); a component id instead of Error where the body has more fields. */
  errors?: Record<number, ErrorSpec>;
  /** More answers under statuses `errors` has too, with a body of their own (403 Storage quota exceeded). */
  moreErrors?: Record<number, ErrorSpec>;
  deprecated?: boolean;
}

/** A short, unique-enough example name from a message. */
function exampleName(message: string, taken: Set<string>): string {
  const base = message.replace(/<[^>]*>/g, '').replace(/[^A-Za-z0-9]+/g, '_').replace(/^_|_$/g, '').slice(0, 48) || 'error';
  let name = base;
  for (let i = 2; taken.has(name); i++) name = `${base}_${i}`;
  taken.add(name);
  return name;
}

type ErrorSpec = readonly string[] | { schema: string; messages: readonly string[]; extra?: Json };

/** One status's answers: the body schemas it may have and each message with the fields beside it. */
interface StatusErrors { schemas: string[]; examples: { message: string; extra?: Json }[] }

function errorResponse(status: number, e: StatusErrors): Json {
  const taken = new Set<string>();
  const examples = Object.fromEntries(e.examples.map(({ message, extra }) => [exampleName(message, taken), { value: { error: message, ...extra } }]));
  const schema = e.schemas.length === 1 ? ref(e.schemas[0]!) : { anyOf: e.schemas.map(ref) };
  return {
    description: e.examples.map((x) => x.message).join(' | ') || `HTTP ${status}`,
    ...(status === 429 || status === 503 ? { headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } } } : {}),
    // The contract's body by default; the whole description to a client that asks (docs/errors.md).
    content: { 'application/json': { schema, examples }, 'application/problem+json': { schema: ref('ProblemDetails') } },
  };
}

/** The rate limit's fields (draft-ietf-httpapi-ratelimit-headers), on every answer of an authenticated operation once its key is checked. */
const RATE_LIMIT_HEADERS: Json = {
  'RateLimit-Policy': { $ref: '#/components/headers/RateLimitPolicy' },
  RateLimit: { $ref: '#/components/headers/RateLimit' },
};

/** The components `RATE_LIMIT_HEADERS` refers to. */
export const rateLimitHeaderComponents: Json = {
  RateLimitPolicy: {
    description: 'The request rate limit: `"default";q=<requests>;w=1` (RATE_LIMIT_PER_SECOND per second per budget). '
      + 'Structured field of draft-ietf-httpapi-ratelimit-headers.',
    schema: { type: 'string', examples: ['"default";q=1000;w=1'] },
  },
  RateLimit: {
    description: 'Where the budget stands after this request: `"default";r=<remaining>;t=<seconds until the window ends>`; a 429 has r=0. '
      + 'Absent when the request was not counted (401, the 503 of an unreachable counter).',
    schema: { type: 'string', examples: ['"default";r=42;t=1'] },
  },
};

/** Messages collected per status, in order, without repeats. */
function merge(into: Map<number, StatusErrors>, status: number, spec: ErrorSpec): void {
  const s = Array.isArray(spec) ? { schema: 'Error', messages: spec as readonly string[], extra: undefined } : spec as { schema: string; messages: readonly string[]; extra?: Json };
  const have = into.get(status) ?? { schemas: [], examples: [] };
  into.set(status, have);
  if (!have.schemas.includes(s.schema)) have.schemas.push(s.schema);
  for (const message of s.messages) {
    if (!have.examples.some((x) => x.message === message)) have.examples.push({ message, ...(s.extra && { extra: s.extra }) });
  }
}

const JSON_BODY_ERRORS: Record<number, string[]> = (() => {
  const out: Record<number, string[]> = { 400: [NOT_AN_OBJECT], 415: [NOT_JSON] };
  for (const [status, message] of Object.values(BODY_ERRORS)) {
    if (status >= 500) continue;
    (out[status] ??= []).push(message);
  }
  return out;
})();

/** Body errors of a POST that reads a JSON body only when one is sent. */
const OPTIONAL_BODY_ERRORS: Record<number, string[]> = { 400: [BODY_ERRORS['entity.parse.failed']![1]], 413: [BODY_ERRORS['entity.too.large']![1]] };

/** What each path parameter of the API is. */
const PATH_PARAMETERS: Record<string, string> = {
  id: 'Job or batch UUID; a malformed one is answered as an unknown one',
  eventId: 'Webhook event UUID (`event_id` of GET /jobs/{id}/webhooks)',
  key: 'Storage key of the file; may contain slashes',
  path: '`<job id>/<storage key>`; may contain slashes',
};

const marketplaceHeader = { $ref: '#/components/parameters/MarketplaceUser' };

/** A query schema's fields as OpenAPI parameters: each field's input JSON Schema, required when absent is refused. */
function queryParameters(query: z.ZodObject): Json[] {
  return Object.entries(query.shape).map(([name, field]) => {
    const { description, ...schema } = tidy(z.toJSONSchema(field, { target: 'draft-2020-12', unrepresentable: 'any', io: 'input' })) as Json;
    return { name, in: 'query', required: !field.safeParse(undefined).success, schema, ...(description !== undefined && { description }) };
  });
}

/** One operation in OpenAPI form. */
export function operationObject(op: Operation): Json {
  const errors = new Map<number, StatusErrors>();
  if (op.access !== 'open') {
    merge(errors, 401, [op.access.key, INVALID_KEY]);
    merge(errors, 403, [MARKETPLACE_USER_REVOKED]);
    merge(errors, 429, [RATE_LIMITED]);
    merge(errors, 503, [RATE_COUNTER_UNAVAILABLE, UNAVAILABLE]);
  }
  if (op.body !== undefined) {
    for (const [status, messages] of Object.entries(op.body === 'none-or-json' ? OPTIONAL_BODY_ERRORS : JSON_BODY_ERRORS)) merge(errors, Number(status), messages);
  }
  if (op.query) merge(errors, 400, queryErrors(op.query));
  for (const [status, spec] of Object.entries(op.errors ?? {})) merge(errors, Number(status), spec);
  for (const [status, spec] of Object.entries(op.moreErrors ?? {})) merge(errors, Number(status), spec);

  const responses: Json = {};
  for (const [status, answer] of Object.entries(op.ok)) {
    if (typeof answer === 'string' || Array.isArray(answer)) {
      const ids = typeof answer === 'string' ? [answer] : answer;
      const schema = ids.length === 1 ? ref(ids[0]!) : { oneOf: ids.map(ref) };
      responses[status] = { description: ids.join(' or '), content: { 'application/json': { schema } } };
    } else {
      responses[status] = answer;
    }
  }
  for (const [status, e] of [...errors].sort(([a], [b]) => a - b)) responses[String(status)] = errorResponse(status, e);
  if (op.access !== 'open') {
    for (const [status, r] of Object.entries(responses)) {
      if (status !== '401' && typeof r === 'object' && r !== null && !('$ref' in r)) {
        const answer = r as { headers?: Json };
        responses[status] = { ...answer, headers: { ...answer.headers, ...RATE_LIMIT_HEADERS } };
      }
    }
  }

  const requestBody = op.body === undefined || op.body === 'none-or-json' ? undefined : {
    required: op.body.required,
    content: { 'application/json': { schema: ref(op.body.schema) } },
  };
  const inPath = [...op.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({
    name, in: 'path', required: true, schema: { type: 'string' }, ...(PATH_PARAMETERS[name!] && { description: PATH_PARAMETERS[name!] }),
  }));
  const parameters = [...inPath, ...(op.query ? queryParameters(op.query) : []), ...(op.parameters ?? []), ...(op.access === 'open' ? [] : [marketplaceHeader])];
  return {
    operationId: op.operationId,
    tags: [op.tag],
    summary: op.summary,
    ...(op.description && { description: op.description }),
    ...(op.deprecated && { deprecated: true }),
    ...(op.access === 'open' && { security: [] }),
    ...(parameters.length && { parameters }),
    ...(requestBody && { requestBody }),
    responses,
  };
}

export const schemaRef = ref;
