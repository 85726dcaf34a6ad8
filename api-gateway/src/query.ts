// A query string checked by the zod object schema that also describes its
// parameters in the OpenAPI document (openapi/build.ts turns each field into
// a parameter, and the messages below into the operation's 400 answers), so
// what is validated and what is published cannot drift. The answer is the
// first problem: "Invalid query parameter 'x': <why>", where <why> is the
// one message the field was built with. A parameter given twice
// (?limit=1&limit=2) is refused before the schema sees it. Parameters the
// schema does not name are ignored, as body fields are.
import { z } from 'zod';
import { HttpError } from './http-errors.js';

const GIVEN_ONCE = 'must be given once';

function queryError(name: string, why: string): string {
  return `Invalid query parameter '${name}': ${why}`;
}

/**
 * The one message each checked parameter's schema answers with, for the
 * document's 400s. A zod registry, so a copy made by .describe() keeps it.
 */
const checks = z.registry<{ why: string }>();

function checked<T extends z.ZodType>(schema: T, why: string): T {
  checks.add(schema, { why });
  return schema;
}

const whyOf = (field: unknown) => checks.get(field as z.ZodType)?.why;

/** An integer from `min` to `max` written in decimal digits (no sign, space or exponent); `def` when absent. */
export function integerParam(min: number, max: number, def: number) {
  const why = `must be an integer from ${min} to ${max}`;
  const digits = (v: unknown) => (typeof v === 'string' && /^\d{1,15}$/.test(v) ? Number(v) : v);
  return checked(z.preprocess(digits, z.number({ error: why }).int({ error: why }).min(min, { error: why }).max(max, { error: why }).default(def)), why);
}

/** One of `values`, in any case (absent: `def`, else undefined); the answer lists them, or says `why`. */
export function oneOfParam<const V extends readonly [string, ...string[]]>(values: V, opts: { why?: string; def?: V[number] } = {}) {
  const why = opts.why ?? `must be one of ${values.map((v) => `'${v}'`).join(', ')}`;
  const lower = (v: unknown) => (typeof v === 'string' ? v.toLowerCase() : v);
  const inner = z.enum(values, { error: why });
  return checked(z.preprocess(lower, opts.def === undefined ? inner.optional() : inner.default(opts.def as never)), why);
}

/** The query's parameters as the schema reads them; 400 naming the first bad one. */
export function parseQuery<S extends z.ZodObject>(schema: S, query: Record<string, unknown>): z.output<S> {
  const given: Record<string, unknown> = {};
  for (const name of Object.keys(schema.shape)) {
    const value = query[name];
    if (Array.isArray(value)) throw new HttpError(400, queryError(name, GIVEN_ONCE));
    if (value !== undefined) given[name] = value;
  }
  const parsed = schema.safeParse(given);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const name = String(issue.path[0]);
  throw new HttpError(400, queryError(name, whyOf(schema.shape[name]) ?? issue.message));
}

/** Every 400 message parseQuery can answer for `schema` (none when no parameter is checked). */
export function queryErrors(schema: z.ZodObject): string[] {
  const named = Object.entries(schema.shape).flatMap(([name, field]) => {
    const why = whyOf(field);
    return why === undefined ? [] : [queryError(name, why)];
  });
  return named.length ? [...named, queryError('<name>', GIVEN_ONCE)] : [];
}

/**
 * The two parameters of a signed download URL (GET /files/..., GET
 * /drive-files/...). Not checked with parseQuery: the signature is the
 * credential, so a URL without them (or with either twice) is answered 403
 * like a forged one, by its route.
 */
export const signedUrlQuery = z.object({
  expires: z.string().describe('Expiry of the URL, seconds since the epoch'),
  sig: z.string().describe('Signature over the key and expires'),
});
