// Whether a stored MediaJob or MediaBatch spec is one the service can run:
// the CRD's own schema (crd-source.ts), node by node (types, enums,
// patterns, lengths, bounds, formats, required fields), its rules across
// fields through their TypeScript twins (crd-source.ts RULE_TWINS), then
// the zod schema the types come from (types.ts). The apiserver checks the
// same on every write, unless the CRD it has lacks the checks: a CRD
// installed without its rules, an object stored before a rule existed, a
// CRD edited by hand. So the operator checks a spec before it does anything
// else with it (controller.ts, batch-controller.ts: it ends invalid_spec,
// never retried) and the runner checks the options it acts on
// (runner-image/src/config.ts). A problem names the field
// (`spec.clipEnd: must be greater than clipStart`) and never echoes its
// value: a URL may carry a token, and webhookUrl is a secret.
import type { z } from 'zod';
import { mediaBatchCrd, mediaJobCrd, PATTERN_PROBLEMS, RULE_TWINS, type SchemaNode } from './crd-source.js';
import type { RequestCategory } from './error-categories.js';
import { mediaBatchSpecSchema, mediaJobSpecSchema, specOptionsSchema } from './types.js';

/** The reason and error category of a job or batch whose spec breaks the CRD's rules. */
export const INVALID_SPEC: RequestCategory = 'invalid_spec';

/** Problems named in one message at most; the rest are counted. */
const MAX_NAMED = 5;

/** The spec node of a CRD, built once. */
function specNodeOf(crd: () => { spec: { versions: { schema: { openAPIV3Schema: SchemaNode } }[] } }): () => SchemaNode {
  let node: SchemaNode | undefined;
  return () => (node ??= crd().spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!);
}

const jobSpecNode = specNodeOf(mediaJobCrd);
const batchSpecNode = specNodeOf(mediaBatchCrd);

/** The MediaJob spec node with only the job options (what a runner acts on) and the rules on them. */
let optionsNode: SchemaNode | undefined;
function jobOptionsNode(): SchemaNode {
  if (optionsNode) return optionsNode;
  const spec = jobSpecNode();
  const keys = Object.keys(specOptionsSchema.shape);
  const properties = Object.fromEntries(Object.entries(spec.properties ?? {}).filter(([k]) => keys.includes(k)));
  return (optionsNode = { ...spec, properties, required: (spec.required ?? []).filter((k) => keys.includes(k)) });
}

/** What is wrong with a MediaJob's spec, each problem naming its field; empty when nothing is. */
export function mediaJobSpecProblems(spec: unknown): string[] {
  return problemsOf(jobSpecNode(), mediaJobSpecSchema, spec);
}

/** What is wrong with a MediaBatch's spec (its options and episodes included); empty when nothing is. */
export function mediaBatchSpecProblems(spec: unknown): string[] {
  return problemsOf(batchSpecNode(), mediaBatchSpecSchema, spec);
}

/** What is wrong with the job options of a spec (the runner's MEDIAJOB_SPEC); other fields are not looked at. */
export function jobOptionProblems(spec: unknown): string[] {
  return problemsOf(jobOptionsNode(), specOptionsSchema, spec);
}

/** The problems as one message, for a status, a condition and an Event: the first few, and how many more. */
export function invalidSpecMessage(problems: readonly string[]): string {
  const named = problems.slice(0, MAX_NAMED).join('; ');
  const more = problems.length - MAX_NAMED;
  return more > 0 ? `${named} (and ${more} more)` : named;
}

function problemsOf(node: SchemaNode, schema: z.ZodType, spec: unknown): string[] {
  if (spec === undefined || spec === null) return ['spec: is required'];
  const out: string[] = [];
  check(node, spec, 'spec', out);
  if (out.length) return out;
  // The zod schema agrees with the CRD field by field (lib/test/crds.test.ts); this catches what a drift would let by.
  const parsed = schema.safeParse(spec);
  if (parsed.success) return [];
  return parsed.error.issues.map((i) => `${['spec', ...i.path.map(String)].join('.')}: ${i.message}`);
}

/** Check `value` against `node` at `path`, as the apiserver validates a stored object, adding what is wrong to `out`. */
function check(node: SchemaNode, value: unknown, path: string, out: string[]): void {
  // null is absence: the apiserver prunes nulls of fields that are not nullable (none here is).
  if (value === undefined || value === null) return;
  const wrongType = typeProblem(node.type, value);
  if (wrongType) {
    out.push(`${path}: ${wrongType}`);
    return;
  }
  const problem = node.type === 'string' ? stringProblem(node, value as string)
    : node.type === 'integer' || node.type === 'number' ? numberProblem(node, value as number)
      : undefined;
  if (problem) out.push(`${path}: ${problem}`);
  if (node.type === 'array' && node.items) (value as unknown[]).forEach((v, i) => check(node.items!, v, `${path}[${i}]`, out));
  if (node.type === 'object') checkObject(node, value as Record<string, unknown>, path, out);
}

function checkObject(node: SchemaNode, o: Record<string, unknown>, path: string, out: string[]): void {
  const before = out.length;
  for (const r of node.required ?? []) {
    if (o[r] === undefined || o[r] === null) out.push(`${path}.${r}: is required`);
  }
  for (const [k, child] of Object.entries(node.properties ?? {})) check(child, o[k], `${path}.${k}`, out);
  if (node.additionalProperties) {
    for (const [k, v] of Object.entries(o)) if (!node.properties?.[k]) check(node.additionalProperties, v, `${path}.${k}`, out);
  }
  if (node.maxProperties !== undefined && Object.keys(o).length > node.maxProperties) out.push(`${path}: must have at most ${node.maxProperties} entries`);
  // The rules read the fields as their types say: judged only once the fields themselves are right.
  if (out.length > before) return;
  for (const rule of node['x-kubernetes-validations'] ?? []) {
    if (rule.rule.includes('oldSelf')) continue;
    const found = RULE_TWINS[rule.message]?.(o);
    if (found) out.push(`${path}${found.at}: ${found.problem}`);
  }
}

const TYPE_WORDS: Record<SchemaNode['type'], string> = {
  string: 'a string', integer: 'an integer', number: 'a number', boolean: 'a boolean (true or false)', object: 'an object', array: 'a list',
};

function typeProblem(type: SchemaNode['type'], v: unknown): string | undefined {
  const ok = type === 'string' ? typeof v === 'string'
    : type === 'integer' ? Number.isInteger(v)
      : type === 'number' ? typeof v === 'number' && Number.isFinite(v)
        : type === 'boolean' ? typeof v === 'boolean'
          : type === 'array' ? Array.isArray(v)
            : typeof v === 'object' && !Array.isArray(v);
  return ok ? undefined : `must be ${TYPE_WORDS[type]}`;
}

// kube-openapi's strfmt: a UUID with or without its dashes, any case.
const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function stringProblem(node: SchemaNode, s: string): string | undefined {
  if (node.enum && !node.enum.includes(s)) return `must be one of ${node.enum.join(', ')}`;
  // Characters, as the apiserver counts them (runes), not UTF-16 units.
  const length = [...s].length;
  if (node.minLength !== undefined && length < node.minLength) return node.minLength === 1 ? 'must not be empty' : `must be at least ${node.minLength} characters`;
  if (node.maxLength !== undefined && length > node.maxLength) return `must be at most ${node.maxLength} characters`;
  for (const pattern of [node.pattern, ...(node.allOf ?? []).map((a) => a.pattern)]) {
    if (pattern !== undefined && !new RegExp(pattern).test(s)) return PATTERN_PROBLEMS[pattern] ?? 'is not in the form the CRD asks for';
  }
  if (node.format === 'uuid' && !UUID.test(s)) return 'must be a UUID';
  if (node.format === 'date-time' && !(DATE_TIME.test(s) && Number.isFinite(Date.parse(s)))) return 'must be a date and time (RFC 3339)';
  return undefined;
}

const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

function numberProblem(node: SchemaNode, n: number): string | undefined {
  if (node.minimum !== undefined && n < node.minimum) return `must be at least ${node.minimum}`;
  if (node.maximum !== undefined && n > node.maximum) return `must be at most ${node.maximum}`;
  if (node.format === 'int32' && (n < INT32.min || n > INT32.max)) return `must be from ${INT32.min} to ${INT32.max}`;
  if (node.format === 'int64' && !Number.isSafeInteger(n)) return 'must be a 64-bit integer';
  return undefined;
}
