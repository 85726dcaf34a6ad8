// A request body checked by the zod schema that also describes it in the
// OpenAPI document (api-gateway/src/openapi/schemas.ts registers the same
// object), so what is validated and what is published cannot drift. The
// answer is the first problem, worded as POST /jobs words its own:
// "Missing required field 'x'" for a required top-level field that is
// absent or null (null counts as absent, as in POST /jobs), else
// "Invalid field 'x.y[0]': <the schema's message>". A schema message that
// is a whole sentence (it starts with a capital) is the answer as it is.
import type { z } from 'zod';

export type BodyResult<T> = { ok: true; data: T } | { ok: false; error: string };

export const NOT_AN_OBJECT = 'Request body must be a JSON object';

export function parseRequestBody<S extends z.ZodType>(schema: S, body: unknown): BodyResult<z.output<S>> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, error: NOT_AN_OBJECT };
  const given = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null));
  const parsed = schema.safeParse(given);
  return parsed.success ? { ok: true, data: parsed.data } : { ok: false, error: issueMessage(parsed.error.issues[0]!, given) };
}

function issueMessage(issue: z.core.$ZodIssue, given: Record<string, unknown>): string {
  const path = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('');
  if (issue.path.length === 1 && given[String(issue.path[0])] === undefined) return `Missing required field '${path}'`;
  if (/^[A-Z]/.test(issue.message)) return issue.message;
  return `Invalid field '${path}': ${issue.message}`;
}
