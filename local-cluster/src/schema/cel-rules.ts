// What a CRD's x-kubernetes-validations must be to be accepted, after
// apiextensions-apiserver's ValidateCustomResourceDefinitionOpenAPISchema:
// the shape of each entry (rule, message, reason, fieldPath), then, when the
// schema is otherwise valid, the compilation of every rule and
// messageExpression and its estimated cost against kube-apiserver's
// per-expression and per-CRD limits. Enforcement on custom resources is
// cel-validate.ts.

import type { JSONSchemaProps, StatusCause } from '../types.js';
import { isObject } from '../object-meta.js';
import { compileExpression, displayError, RULE_VARIABLES, type CompiledExpression, type SourceError } from './cel-library.js';
import {
  childCardinalityFactor, costErrorMessage, maxCardinality, multiplyCardinality, schemaDecl,
  STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT, MAX_COST,
} from './cel-cost.js';
import { resolveFieldPath, rulesAt, type ValidationRule } from './cel-validate.js';
import { fieldErrors as fe, goQuote, GoLiteral } from './validate.js';

const REASONS = ['FieldValueDuplicate', 'FieldValueForbidden', 'FieldValueInvalid', 'FieldValueRequired'];

/** The entries' own checks (the apiserver's SchemaErrors), for the node at `path`. */
export function ruleShapeErrors(s: JSONSchemaProps, path: string): StatusCause[] {
  const errs: StatusCause[] = [];
  rulesAt(s).forEach((r, i) => {
    const at = `${path}.x-kubernetes-validations[${i}]`;
    const rule = (r.rule ?? '').trim();
    const message = (r.message ?? '').trim();
    if (!rule) errs.push(fe.required(`${at}.rule`, 'rule is not specified'));
    else if (r.message && !message) errs.push(fe.invalid(`${at}.message`, r.message, 'message must be non-empty if specified'));
    else if (message.includes('\n')) errs.push(fe.invalid(`${at}.message`, r.message, 'message must not contain line breaks'));
    else if (rule.includes('\n') && !message) errs.push(fe.required(`${at}.message`, 'message must be specified if rule contains line breaks'));
    if (r.messageExpression && !r.messageExpression.trim()) {
      errs.push(fe.required(`${at}.messageExpression`, 'messageExpression must be non-empty if specified'));
    }
    if (r.reason !== undefined && !REASONS.includes(r.reason)) errs.push(fe.notSupported(`${at}.reason`, r.reason, REASONS));
    if (r.fieldPath) {
      if (!r.fieldPath.trim()) errs.push(fe.invalid(`${at}.fieldPath`, r.fieldPath, 'fieldPath must be non-empty if specified'));
      if (r.fieldPath.includes('\n')) errs.push(fe.invalid(`${at}.fieldPath`, r.fieldPath, 'fieldPath must not contain line breaks'));
      if (resolveFieldPath(r.fieldPath, s) === undefined) errs.push(fe.invalid(`${at}.fieldPath`, r.fieldPath, 'fieldPath must be a valid path'));
    }
  });
  return errs;
}

/** %#v of the internal apiextensions.ValidationRule, the bad value of a compile error. */
function ruleLiteral(r: ValidationRule): GoLiteral {
  const pointer = (type: string, set: boolean): string => `(*${type})(${set ? '0xc000000000' : 'nil'})`;
  return new GoLiteral(`apiextensions.ValidationRule{Rule:${goQuote(r.rule ?? '')}, Message:${goQuote(r.message ?? '')}, `
    + `MessageExpression:${goQuote(r.messageExpression ?? '')}, Reason:${pointer('apiextensions.FieldValueErrorReason', r.reason !== undefined)}, `
    + `FieldPath:${goQuote(r.fieldPath ?? '')}, OptionalOldSelf:${pointer('bool', r.optionalOldSelf !== undefined)}}`);
}

type Kind = 'bool' | 'string' | 'other' | 'unknown';

/** What the checker would know without types: the kind of a literal or an arithmetic result. */
function evidentKind(source: string): Kind {
  const s = source.trim();
  if (/^(true|false)$/.test(s)) return 'bool';
  if (/^("([^"\\]|\\.)*"|'([^'\\]|\\.)*')$/.test(s)) return 'string';
  if (/^-?\d+(\.\d+)?u?$/.test(s) || /^\[.*\]$/s.test(s) || /^\{.*\}$/s.test(s)) return 'other';
  return 'unknown';
}

// What `self` holds at a resource root besides its schema's properties (model.WithTypeAndObjectMeta).
const RESOURCE_ROOT_FIELDS: Record<string, JSONSchemaProps> = {
  apiVersion: { type: 'string' },
  kind: { type: 'string' },
  metadata: { type: 'object', properties: { name: { type: 'string' }, generateName: { type: 'string' } } },
};

/** The schema of a selected field; 'any' where keys are free (maps, preserved fields) or the type is not an object's. */
function selectedField(s: JSONSchemaProps, name: string, resourceRoot: boolean): JSONSchemaProps | 'any' | undefined {
  if (resourceRoot && RESOURCE_ROOT_FIELDS[name]) return RESOURCE_ROOT_FIELDS[name];
  if (s.properties && Object.hasOwn(s.properties, name)) return s.properties[name]!;
  if (s.type !== 'object' || !s.properties || s.additionalProperties !== undefined || s['x-kubernetes-preserve-unknown-fields']) return 'any';
  return undefined;
}

/** The checker's field resolution, for self and oldSelf: `undefined field 'x'` where the object's schema has no x. */
function undefinedFieldIssues(source: string, compiled: CompiledExpression, node: JSONSchemaProps, resourceRoot: boolean): string | undefined {
  const errors: SourceError[] = [];
  for (const { variable, fields } of compiled.selections()) {
    if (!RULE_VARIABLES.includes(variable)) continue;
    let s = node;
    let root = resourceRoot;
    for (const f of fields) {
      const next = selectedField(s, f.name, root);
      if (next === 'any') break;
      if (next === undefined) {
        errors.push({ offset: f.offset, message: `undefined field '${f.name}'` });
        break;
      }
      s = next;
      root = next['x-kubernetes-embedded-resource'] === true;
    }
  }
  return errors.length ? errors.sort((a, b) => a.offset - b.offset).map((e) => displayError(source, e)).join('\n') : undefined;
}

/** compileExpression plus the field check, as cel-go's Compile would fail it. */
function compileAt(source: string, node: JSONSchemaProps, resourceRoot: boolean): CompiledExpression | { issues: string } {
  const compiled = compileExpression(source, RULE_VARIABLES);
  if (!('evaluate' in compiled)) return compiled;
  const issues = undefinedFieldIssues(source, compiled, node, resourceRoot);
  return issues ? { issues } : compiled;
}

/** What one schema's rules cost together (cel_validation.go TotalCost), with the four most expensive. */
class TotalCost {
  total = 0;
  mostExpensive: { path: string; cost: number }[] = [];

  observe(path: string, cost: number): void {
    this.total = Math.min(MAX_COST, this.total + cost);
    if (cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100) return; // under 1% of the limit: never named
    this.mostExpensive.push({ path, cost });
    this.mostExpensive.sort((a, b) => b.cost - a.cost);
    this.mostExpensive.length = Math.min(this.mostExpensive.length, 4);
  }
}

interface CostContext {
  /** How often the node can occur in one object: the product of maxItems/maxProperties above it; undefined when one is missing. */
  cardinality: number | undefined;
  total: TotalCost;
}

function ruleCompileErrors(r: ValidationRule, at: string, node: JSONSchemaProps, resourceRoot: boolean, uncorrelatable: string | undefined, cost: CostContext): StatusCause[] {
  const compiled = compileAt(r.rule, node, resourceRoot);
  if (!('evaluate' in compiled)) return [fe.invalid(`${at}.rule`, ruleLiteral(r), `compilation failed: ${compiled.issues}`)];
  const kind = evidentKind(r.rule);
  if (kind !== 'bool' && kind !== 'unknown') return [fe.invalid(`${at}.rule`, ruleLiteral(r), 'cel expression must evaluate to a bool')];
  const errs: StatusCause[] = [];
  const self = schemaDecl(node, resourceRoot);
  // getExpressionCost: under an unbounded list or map, as often as the smallest value fits in a request.
  const expressionCost = multiplyCardinality(compiled.estimateCost(self).max, cost.cardinality ?? maxCardinality(self));
  if (expressionCost > STATIC_ESTIMATED_COST_LIMIT) {
    errs.push(fe.forbidden(`${at}.rule`, costErrorMessage('estimated rule cost', expressionCost, STATIC_ESTIMATED_COST_LIMIT)));
  }
  cost.total.observe(`${at}.rule`, expressionCost);
  if (r.messageExpression) {
    const message = compileAt(r.messageExpression, node, resourceRoot);
    if (!('evaluate' in message)) {
      errs.push(fe.invalid(`${at}.messageExpression`, ruleLiteral(r), `messageExpression compilation failed: ${message.issues}`));
    } else if (!['string', 'unknown'].includes(evidentKind(r.messageExpression))) {
      errs.push(fe.invalid(`${at}.messageExpression`, ruleLiteral(r), 'messageExpression must evaluate to a string'));
    } else {
      const messageCost = message.estimateCost(self).max;
      if (messageCost > STATIC_ESTIMATED_COST_LIMIT) {
        errs.push(fe.forbidden(`${at}.messageExpression`, costErrorMessage('estimated messageExpression cost', messageCost, STATIC_ESTIMATED_COST_LIMIT)));
      }
      cost.total.observe(`${at}.messageExpression`, messageCost);
    }
  }
  if (compiled.references('oldSelf')) {
    if (uncorrelatable !== undefined) {
      errs.push(fe.invalid(`${at}.rule`, r.rule, `oldSelf cannot be used on the uncorrelatable portion of the schema within ${uncorrelatable}`));
    }
  } else if (r.optionalOldSelf !== undefined) {
    errs.push(fe.invalid(`${at}.optionalOldSelf`, r.optionalOldSelf, 'may not be set if oldSelf is not used in rule'));
  }
  return errs;
}

/**
 * The compilation of every rule in the schema (the apiserver's CELErrors),
 * in its walk order, each rule's estimated cost against the per-expression
 * limit, then the schema's total against the per-CRD limit. Below a list
 * that is not list-type map, old and new items cannot be matched, so oldSelf
 * is refused there.
 */
export function celCompileErrors(schema: JSONSchemaProps, path: string): StatusCause[] {
  const total = new TotalCost();
  const errs = nodeCompileErrors(schema, path, true, undefined, { cardinality: 1, total });
  if (total.total > STATIC_ESTIMATED_CRD_COST_LIMIT) {
    for (const expensive of total.mostExpensive) {
      errs.push(fe.forbidden(expensive.path, 'contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema'));
    }
    errs.push(fe.forbidden(path, costErrorMessage('x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema', total.total, STATIC_ESTIMATED_CRD_COST_LIMIT)));
  }
  return errs;
}

function nodeCompileErrors(s: JSONSchemaProps, path: string, resourceRoot: boolean, uncorrelatable: string | undefined, cost: CostContext): StatusCause[] {
  const errs: StatusCause[] = [];
  const factor = childCardinalityFactor(s);
  const childCost: CostContext = {
    total: cost.total,
    cardinality: cost.cardinality === undefined || factor === undefined ? undefined : multiplyCardinality(cost.cardinality, factor),
  };
  const below = (sub: JSONSchemaProps, at: string, forbid = uncorrelatable): StatusCause[] =>
    nodeCompileErrors(sub, at, sub['x-kubernetes-embedded-resource'] === true, forbid, childCost);
  if (isObject(s.additionalProperties)) errs.push(...below(s.additionalProperties as JSONSchemaProps, `${path}.additionalProperties`));
  for (const [key, prop] of Object.entries(s.properties ?? {})) errs.push(...below(prop, `${path}.properties[${key}]`));
  if (s.items) errs.push(...below(s.items, `${path}.items`, uncorrelatable ?? (s['x-kubernetes-list-type'] === 'map' ? undefined : path)));
  rulesAt(s).forEach((r, i) => {
    if ((r.rule ?? '').trim()) errs.push(...ruleCompileErrors(r, `${path}.x-kubernetes-validations[${i}]`, s, resourceRoot, uncorrelatable, cost));
  });
  return errs;
}
