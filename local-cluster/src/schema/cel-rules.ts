// What a CRD's x-kubernetes-validations must be to be accepted, after
// apiextensions-apiserver's ValidateCustomResourceDefinitionOpenAPISchema:
// the shape of each entry (rule, message, reason, fieldPath), then, when the
// schema is otherwise valid, the compilation of every rule and
// messageExpression. Enforcement on custom resources is cel-validate.ts.

import type { JSONSchemaProps, StatusCause } from '../types.js';
import { isObject } from '../object-meta.js';
import { compileExpression, displayError, RULE_VARIABLES, type CompiledExpression, type SourceError } from './cel-library.js';
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

function ruleCompileErrors(r: ValidationRule, at: string, node: JSONSchemaProps, resourceRoot: boolean, uncorrelatable: string | undefined): StatusCause[] {
  const compiled = compileAt(r.rule, node, resourceRoot);
  if (!('evaluate' in compiled)) return [fe.invalid(`${at}.rule`, ruleLiteral(r), `compilation failed: ${compiled.issues}`)];
  const kind = evidentKind(r.rule);
  if (kind !== 'bool' && kind !== 'unknown') return [fe.invalid(`${at}.rule`, ruleLiteral(r), 'cel expression must evaluate to a bool')];
  const errs: StatusCause[] = [];
  if (r.messageExpression) {
    const message = compileAt(r.messageExpression, node, resourceRoot);
    if (!('evaluate' in message)) {
      errs.push(fe.invalid(`${at}.messageExpression`, ruleLiteral(r), `messageExpression compilation failed: ${message.issues}`));
    } else if (!['string', 'unknown'].includes(evidentKind(r.messageExpression))) {
      errs.push(fe.invalid(`${at}.messageExpression`, ruleLiteral(r), 'messageExpression must evaluate to a string'));
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
 * in its walk order. Below a list that is not list-type map, old and new
 * items cannot be matched, so oldSelf is refused there.
 */
export function celCompileErrors(s: JSONSchemaProps, path: string, resourceRoot = true, uncorrelatable?: string): StatusCause[] {
  const errs: StatusCause[] = [];
  const below = (sub: JSONSchemaProps, at: string, forbid = uncorrelatable): StatusCause[] =>
    celCompileErrors(sub, at, sub['x-kubernetes-embedded-resource'] === true, forbid);
  if (isObject(s.additionalProperties)) errs.push(...below(s.additionalProperties as JSONSchemaProps, `${path}.additionalProperties`));
  for (const [key, prop] of Object.entries(s.properties ?? {})) errs.push(...below(prop, `${path}.properties[${key}]`));
  if (s.items) errs.push(...below(s.items, `${path}.items`, uncorrelatable ?? (s['x-kubernetes-list-type'] === 'map' ? undefined : path)));
  rulesAt(s).forEach((r, i) => {
    if ((r.rule ?? '').trim()) errs.push(...ruleCompileErrors(r, `${path}.x-kubernetes-validations[${i}]`, s, resourceRoot, uncorrelatable));
  });
  return errs;
}
