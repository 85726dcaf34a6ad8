// Enforcing x-kubernetes-validations on custom resources, after
// apiextensions-apiserver pkg/apiserver/schema/cel/validation.go: each rule
// runs where it is declared with `self` the value there, and `oldSelf` the
// value at the same place in the stored object when there is one to
// correlate (object properties, maps, and items of list-type map lists by
// their keys). Transition rules (those reading oldSelf) are skipped where
// there is no old value. A failing rule without oldSelf whose value did not
// change is only a warning (CRDValidationRatcheting, on by default in 1.32).
// Each evaluation stops past PerCallLimit and all of one object's together
// past RuntimeCELCostBudget, with the apiserver's errors, after which no
// further rule runs. Which rules compile is the CRD's business (cel-rules.ts).

import type { CelInput } from '@bufbuild/cel';
import type { JSONSchemaProps, StatusCause } from '../types.js';
import { deepEqual, isObject } from '../object-meta.js';
import { compileExpression, RULE_VARIABLES, type CompiledExpression } from './cel-library.js';
import { PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET } from './cel-cost.js';
import { fieldErrors, goQuote } from './validate.js';

export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: string;
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

interface CompiledRule {
  rule: ValidationRule;
  program: CompiledExpression | { issues: string };
  message?: CompiledExpression;
  usesOldSelf: boolean;
}

const compiledRules = new WeakMap<JSONSchemaProps, CompiledRule[]>();

export function rulesAt(node: JSONSchemaProps): ValidationRule[] {
  const rules = node['x-kubernetes-validations'];
  return Array.isArray(rules) ? rules.filter(isObject) as unknown as ValidationRule[] : [];
}

function compiledAt(node: JSONSchemaProps): CompiledRule[] {
  let compiled = compiledRules.get(node);
  if (!compiled) {
    compiled = rulesAt(node).filter((r) => typeof r.rule === 'string' && r.rule.trim()).map((rule) => {
      const program = compileExpression(rule.rule, RULE_VARIABLES);
      const message = rule.messageExpression ? compileExpression(rule.messageExpression, RULE_VARIABLES) : undefined;
      return {
        rule,
        program,
        message: message && 'evaluate' in message ? message : undefined,
        usesOldSelf: 'references' in program && program.references('oldSelf'),
      };
    });
    compiledRules.set(node, compiled);
  }
  return compiled;
}

// ---------------------------------------------------------------------------
// JSON → CEL values (UnstructuredToVal): integers are CEL ints, numbers
// doubles; objects are maps of their declared fields; at a resource root
// metadata shows only name and generateName.

const RESOURCE_META = ['apiVersion', 'kind', 'metadata'];

function childSchema(s: JSONSchemaProps | undefined, key: string): JSONSchemaProps | undefined {
  if (!s) return undefined;
  if (s.properties && Object.hasOwn(s.properties, key)) return s.properties[key];
  return isObject(s.additionalProperties) ? s.additionalProperties as JSONSchemaProps : undefined;
}

function visibleKeys(v: Record<string, unknown>, s: JSONSchemaProps | undefined, resourceRoot: boolean): string[] {
  return Object.keys(v).filter((k) => {
    if (resourceRoot && RESOURCE_META.includes(k)) return true;
    if (!s || s['x-kubernetes-preserve-unknown-fields']) return true;
    return (s.properties !== undefined && Object.hasOwn(s.properties, k)) || s.additionalProperties !== undefined;
  });
}

function toCel(v: unknown, s: JSONSchemaProps | undefined, resourceRoot = false): CelInput {
  if (v === null || v === undefined) return null;
  if (Array.isArray(v)) return v.map((x) => toCel(x, s?.items));
  if (isObject(v)) {
    const entries = visibleKeys(v, s, resourceRoot).map((k): [string, CelInput] => {
      if (resourceRoot && k === 'metadata' && isObject(v.metadata)) {
        const { name, generateName } = v.metadata;
        return [k, toCel({ ...(name !== undefined && { name }), ...(generateName !== undefined && { generateName }) }, undefined)];
      }
      const sub = childSchema(s, k);
      return [k, toCel(v[k], sub, sub?.['x-kubernetes-embedded-resource'] === true)];
    });
    return new Map(entries);
  }
  if (typeof v === 'number') {
    if (s?.type === 'number') return v;
    return Number.isInteger(v) ? BigInt(v) : v;
  }
  return v as CelInput;
}

// ---------------------------------------------------------------------------
// Evaluation.

export interface CelOutcome {
  errors: StatusCause[];
  /** Ratcheted failures, as the apiserver's Warning headers. */
  warnings: string[];
}

interface Place {
  path: string | null; // field.Path: null is the root, printed "<nil>"
  /** The value here equals the old one (or the nearest correlatable ancestor's does): ratchet. */
  unchanged: boolean;
  resourceRoot: boolean;
  ratchet: boolean;
  /** What is left of the object's cost budget, shared by every node; negative once validation stopped. */
  budget: { remaining: number };
}

const OUT_OF_BUDGET = 'validation failed due to running out of cost budget, no further validation rules will be run';
const MESSAGE_OUT_OF_BUDGET = 'messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run';

const child = (p: string | null, k: string): string => (p === null ? k : `${p}.${k}`);
const keyed = (p: string | null, k: string | number): string => `${p ?? '<nil>'}[${k}]`;
const trimmed = (s: string | undefined): string => (s ?? '').trim();

/** ruleErrorString: the message if there is one, else the rule. */
const ruleText = (r: ValidationRule): string => trimmed(r.message) || trimmed(r.rule);

/**
 * ValidFieldPath: a rule's fieldPath (".a.b", ".m['k']") resolved against the
 * node's schema as the field.Path it names, or undefined when a step names
 * no field there.
 */
export function resolveFieldPath(fieldPath: string, s: JSONSchemaProps): string | undefined {
  const steps = /^(?:\.[^.[\]']+|\['(?:[^'\\]|\\.)*'\])+$/.test(fieldPath)
    ? [...fieldPath.matchAll(/\.([^.[\]']+)|\['((?:[^'\\]|\\.)*)'\]/g)] : [];
  if (!steps.length) return undefined;
  let path = '';
  let node: JSONSchemaProps | undefined = s;
  for (const m of steps) {
    const name = m[1] ?? (m[2] ?? '').replace(/\\(.)/g, '$1');
    if (node?.properties !== undefined) {
      if (!Object.hasOwn(node.properties, name)) return undefined;
      path = path ? `${path}.${name}` : name;
    } else if (node?.additionalProperties !== undefined) {
      path = `${path}[${name}]`;
    } else {
      return undefined;
    }
    node = childSchema(node, name);
  }
  return path;
}

function fieldErrorFor(reason: string | undefined, field: string, type: string, detail: string): StatusCause {
  switch (reason) {
    case 'FieldValueForbidden': return fieldErrors.forbidden(field, detail);
    case 'FieldValueRequired': return fieldErrors.required(field, detail);
    case 'FieldValueDuplicate': return fieldErrors.duplicate(field, type);
    default: return fieldErrors.invalid(field, type, detail);
  }
}

/**
 * evalMessageExpression: a usable message, or undefined to fall back to
 * message; its cost comes out of the budget, and running out of it (or
 * past PerCallLimit) is an error that stops validation.
 */
function evaluatedMessage(expr: CompiledExpression | undefined, source: string, vars: Record<string, CelInput>, budget: Place['budget']): { message?: string; stop?: string } {
  if (!expr) return {};
  const run = expr.run(vars, PER_CALL_LIMIT);
  if (run.cost > budget.remaining) return { stop: MESSAGE_OUT_OF_BUDGET };
  if (run.exceeded) return { stop: `no further validation rules will be run due to call cost exceeds limit for messageExpression: ${goQuote(source)}` };
  budget.remaining -= run.cost;
  if (typeof run.result !== 'string') return {};
  const message = run.result.trim();
  return message && !message.includes('\n') && message.length <= 5 * 1024 ? { message } : {};
}

function nodeRules(s: JSONSchemaProps, value: unknown, old: unknown, at: Place, out: CelOutcome): void {
  if (!compiledAt(s).length) return;
  const type = s.type ?? '';
  const field = at.path ?? '<nil>';
  const stop = (detail: string, where = field): void => {
    out.errors.push(fieldErrors.invalid(where, type, detail));
    at.budget.remaining = -1;
  };
  if (at.budget.remaining <= 0) return stop(OUT_OF_BUDGET);
  const self = toCel(value, s, at.resourceRoot);
  const vars: Record<string, CelInput> = { self };
  if (old !== undefined && old !== null) vars.oldSelf = toCel(old, s, at.resourceRoot);
  for (const c of compiledAt(s)) {
    if (!('evaluate' in c.program)) {
      out.errors.push(fieldErrors.invalid(field, type, `rule compile error: compilation failed: ${c.program.issues}`));
      continue;
    }
    if (c.usesOldSelf && vars.oldSelf === undefined) continue; // transition rules need a value to compare with
    const run = c.program.run(vars, PER_CALL_LIMIT);
    if (run.cost > at.budget.remaining) return stop(OUT_OF_BUDGET);
    at.budget.remaining -= run.cost;
    if (run.exceeded) {
      return stop(`'${run.result instanceof Error ? run.result.message : ''}': no further validation rules will be run due to call cost exceeds limit for rule: ${ruleText(c.rule)}`);
    }
    const result = run.result;
    if (result === true) continue;
    if (result instanceof Error) {
      out.errors.push(fieldErrors.invalid(field, type, `${result.message} evaluating rule: ${ruleText(c.rule)}`));
      continue;
    }
    const where = c.rule.fieldPath ? resolveFieldPath(c.rule.fieldPath, s) ?? '' : '';
    const fieldPath = where ? child(at.path, where) : field;
    const add = (cause: StatusCause): void => {
      if (!c.usesOldSelf && at.unchanged) out.warnings.push(`${cause.field}: ${cause.message}`);
      else out.errors.push(cause);
    };
    const message = evaluatedMessage(c.message, c.rule.messageExpression ?? '', vars, at.budget);
    if (message.stop) {
      add(fieldErrors.invalid(fieldPath, type, message.stop));
      at.budget.remaining = -1;
      return;
    }
    const detail = message.message ?? (trimmed(c.rule.message) || `failed rule: ${trimmed(c.rule.rule)}`);
    add(fieldErrorFor(c.rule.reason, fieldPath, type, detail));
  }
}

/** The old item a list-type map item correlates with: the one with the same keys. */
function oldListItem(s: JSONSchemaProps, item: unknown, old: unknown): unknown {
  if (s['x-kubernetes-list-type'] !== 'map' || !Array.isArray(old) || !isObject(item)) return undefined;
  const keys = s['x-kubernetes-list-map-keys'] ?? [];
  return old.find((o) => isObject(o) && keys.every((k) => deepEqual(o[k], item[k])));
}

function walk(s: JSONSchemaProps, value: unknown, old: unknown, at: Place, out: CelOutcome): void {
  if (value === null || value === undefined) return;
  nodeRules(s, value, old, at, out);
  const below = (sub: JSONSchemaProps, v: unknown, o: unknown, path: string): void => {
    if (!hasRules(sub) || at.budget.remaining < 0) return;
    // An uncorrelated value ratchets as its nearest correlated ancestor does.
    const unchanged = o === undefined ? at.unchanged : at.ratchet && deepEqual(v, o);
    walk(sub, v, o, { ...at, path, unchanged, resourceRoot: sub['x-kubernetes-embedded-resource'] === true }, out);
  };
  if (Array.isArray(value) && s.items) {
    value.forEach((v, i) => below(s.items!, v, oldListItem(s, v, old), keyed(at.path, i)));
  } else if (isObject(value)) {
    const oldMap = isObject(old) ? old : {};
    for (const [k, v] of Object.entries(value)) {
      if (s.properties && Object.hasOwn(s.properties, k)) below(s.properties[k]!, v, oldMap[k], child(at.path, k));
      else if (isObject(s.additionalProperties)) below(s.additionalProperties as JSONSchemaProps, v, oldMap[k], keyed(at.path, k));
    }
  }
}

const withRules = new WeakMap<JSONSchemaProps, boolean>();

/** Whether any rule lies at or below the node; cached, as every write of every custom resource asks. */
function hasRules(s: JSONSchemaProps | undefined): boolean {
  if (!s) return false;
  let found = withRules.get(s);
  if (found === undefined) {
    found = rulesAt(s).length > 0 || hasRules(s.items)
      || Object.values(s.properties ?? {}).some(hasRules)
      || (isObject(s.additionalProperties) && hasRules(s.additionalProperties as JSONSchemaProps));
    withRules.set(s, found);
  }
  return found;
}

// hasBlockingErr: rules are not run on an object whose shape is already wrong.
const BLOCKING = new Set(['FieldValueNotSupported', 'FieldValueRequired', 'FieldValueTooLong', 'FieldValueTooMany', 'FieldValueTypeInvalid']);
const NOT_CHECKED = 'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation';

/**
 * Runs the CRD's validation rules on a custom resource (with the stored
 * object on update), after its schema validation gave `schemaCauses`.
 * `ratchet` is false for /status writes, which the apiserver validates
 * without ratcheting.
 */
export function celValidate(obj: unknown, old: unknown, schema: JSONSchemaProps, schemaCauses: StatusCause[], ratchet: boolean): CelOutcome {
  const out: CelOutcome = { errors: [], warnings: [] };
  if (!hasRules(schema)) return out;
  if (schemaCauses.some((c) => BLOCKING.has(c.reason))) {
    out.errors.push(fieldErrors.invalid('<nil>', null, NOT_CHECKED));
    return out;
  }
  const unchanged = ratchet && old !== undefined && deepEqual(obj, old);
  walk(schema, obj, old, { path: null, unchanged, resourceRoot: true, ratchet, budget: { remaining: RUNTIME_CEL_COST_BUDGET } }, out);
  return out;
}
