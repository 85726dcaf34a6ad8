// What a CRD's x-kubernetes-validations must be to be accepted, after
// apiextensions-apiserver's ValidateCustomResourceDefinitionOpenAPISchema:
// the shape of each entry (rule, message, reason, fieldPath), then, when the
// schema is otherwise valid, the compilation of every rule and
// messageExpression. Enforcement on custom resources is cel-validate.ts.

import type { JSONSchemaProps, StatusCause } from '../types.js';
import { isObject } from '../object-meta.js';
import { compileExpression } from './cel-library.js';
import { resolveFieldPath, rulesAt, type ValidationRule } from './cel-validate.js';
import { fieldErrors as fe, goQuote, GoLiteral } from './validate.js';

const REASONS = ['FieldValueDuplicate', 'FieldValueForbidden', 'FieldValueInvalid', 'FieldValueRequired'];
const VARIABLES = ['self', 'oldSelf'];

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

function ruleCompileErrors(r: ValidationRule, at: string, uncorrelatable: string | undefined): StatusCause[] {
  const compiled = compileExpression(r.rule, VARIABLES);
  if (!('evaluate' in compiled)) return [fe.invalid(`${at}.rule`, ruleLiteral(r), `compilation failed: ${compiled.issues}`)];
  const kind = evidentKind(r.rule);
  if (kind !== 'bool' && kind !== 'unknown') return [fe.invalid(`${at}.rule`, ruleLiteral(r), 'cel expression must evaluate to a bool')];
  const errs: StatusCause[] = [];
  if (r.messageExpression) {
    const message = compileExpression(r.messageExpression, VARIABLES);
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
export function celCompileErrors(s: JSONSchemaProps, path: string, uncorrelatable?: string): StatusCause[] {
  const errs: StatusCause[] = [];
  if (isObject(s.additionalProperties)) errs.push(...celCompileErrors(s.additionalProperties as JSONSchemaProps, `${path}.additionalProperties`, uncorrelatable));
  for (const [key, prop] of Object.entries(s.properties ?? {})) errs.push(...celCompileErrors(prop, `${path}.properties[${key}]`, uncorrelatable));
  if (s.items) {
    const forbid = uncorrelatable ?? (s['x-kubernetes-list-type'] === 'map' ? undefined : path);
    errs.push(...celCompileErrors(s.items, `${path}.items`, forbid));
  }
  rulesAt(s).forEach((r, i) => {
    if ((r.rule ?? '').trim()) errs.push(...ruleCompileErrors(r, `${path}.x-kubernetes-validations[${i}]`, uncorrelatable));
  });
  return errs;
}
