// A request body checked by the zod schema that also describes it in the
// OpenAPI document (api-gateway/src/openapi/schemas.ts registers the same
// object), so what is validated and what is published cannot drift. The
// answer is every problem found, in the schema's order, each worded as
// POST /jobs words its own: "Missing required field 'x'" for a required
// top-level field that is absent or null (null counts as absent, as in
// POST /jobs), else "Invalid field 'x.y[0]': <the schema's message>". A
// schema message that is a whole sentence (it starts with a capital) is the
// answer as it is. The first problem is the answer's `error`; the gateway's
// error path (api-gateway/src/http-errors.ts) sends them all as `errors`.
import type { z } from 'zod';

/** One problem of a request body: what is wrong (a code of the gateway's list), with which field, in words. */
export interface FieldProblem {
  code: 'missing_field' | 'invalid_field' | 'conflicting_fields';
  /** The field's path as the messages write it: `url`, `storage.bucket`, `renames[1].filename`. */
  param: string;
  message: string;
}

export type BodyResult<T> = { ok: true; data: T } | { ok: false; error: string; problems: FieldProblem[] };

export const NOT_AN_OBJECT = 'Request body must be a JSON object';

export function parseRequestBody<S extends z.ZodType>(schema: S, body: unknown): BodyResult<z.output<S>> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, error: NOT_AN_OBJECT, problems: [] };
  const given = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null));
  const parsed = schema.safeParse(given);
  if (parsed.success) return { ok: true, data: parsed.data };
  const problems = parsed.error.issues.map((issue) => problemOf(issue, given));
  return { ok: false, error: problems[0]!.message, problems };
}

/** `x.y[0]`: a path as the messages name a field. */
export function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('');
}

/** The problem a zod issue describes; `given` tells an absent field from a wrong one. */
function problemOf(issue: z.core.$ZodIssue, given: Record<string, unknown>): FieldProblem {
  const param = fieldPath(issue.path);
  if (issue.path.length === 1 && given[String(issue.path[0])] === undefined) {
    return { code: 'missing_field', param, message: `Missing required field '${param}'` };
  }
  const code = issue.message.startsWith('Missing required field') ? 'missing_field' : 'invalid_field';
  if (/^[A-Z]/.test(issue.message)) return { code, param, message: issue.message };
  return { code, param, message: `Invalid field '${param}': ${issue.message}` };
}
