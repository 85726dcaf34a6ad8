// Label and field selectors, parsed and matched like the apiserver does
// (k8s.io/apimachinery/pkg/labels/selector.go, pkg/fields/selector.go, the
// field-label conversion functions registered per kind, and each registry's
// selectable-field set). Parse errors are 400 BadRequest with apimachinery's
// messages, because the list handler wraps them in errors.NewBadRequest.
import { StatusError, badRequest } from './errors.js';
import type { KubeObject } from './types.js';

export type Matcher = (obj: KubeObject) => boolean;

const everything: Matcher = () => true;
const nothing: Matcher = () => false;

// ---------------------------------------------------------------------------
// Label requirements and their validation (labels.NewRequirement)

type Operator = 'in' | 'notin' | '=' | '==' | '!=' | 'gt' | 'lt' | 'exists' | '!';

interface Requirement {
  key: string;
  op: Operator;
  values: string[];
}

const BINARY_OPERATORS = ['in', 'notin', '=', '==', '!=', 'gt', 'lt'];

function requirementMatches(r: Requirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] ?? '' : '';
  switch (r.op) {
    case 'in': case '=': case '==':
      return has && r.values.includes(value);
    case 'notin': case '!=':
      return !has || !r.values.includes(value);
    case 'exists':
      return has;
    case '!':
      return !has;
    case 'gt': case 'lt': {
      const actual = parseInt64(value);
      const bound = r.values.length === 1 ? parseInt64(r.values[0] ?? '') : undefined;
      if (!has || actual === undefined || bound === undefined) return false;
      return r.op === 'gt' ? actual > bound : actual < bound;
    }
  }
}

function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?\d+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n >= -(2n ** 63n) && n < 2n ** 63n ? n : undefined;
}

function labelsOf(obj: KubeObject): Record<string, string> {
  return obj?.metadata?.labels ?? {};
}

function matcherFor(reqs: Requirement[]): Matcher {
  if (reqs.length === 0) return everything;
  return (obj) => {
    const labels = labelsOf(obj);
    return reqs.every((r) => requirementMatches(r, labels));
  };
}

// field.Error.Error() for an Invalid value: "<path>: Invalid value: <value>: <detail>".
// Go prints a nil path as "<nil>" and a string value with %q.
function invalidValue(path: string, value: string | string[], detail: string): string {
  const shown = Array.isArray(value)
    ? `[]string{${value.map((v) => JSON.stringify(v)).join(', ')}}`
    : JSON.stringify(value);
  return `${path}: Invalid value: ${shown}: ${detail}`;
}

/** utilerrors.NewAggregate(errs).Error(): one message, or "[a, b]" without duplicates. */
function aggregate(errs: string[]): string {
  const unique = [...new Set(errs)];
  return unique.length === 1 ? unique[0] ?? '' : `[${unique.join(', ')}]`;
}

// k8s.io/apimachinery/pkg/util/validation messages
const QUALIFIED_NAME_FMT = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const QUALIFIED_NAME_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT = `(${QUALIFIED_NAME_FMT})?`;
const LABEL_VALUE_MSG = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*';
const DNS1123_SUBDOMAIN_MSG = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

function regexError(msg: string, fmt: string, ...examples: string[]): string {
  if (examples.length === 0) return `${msg} (regex used for validation is '${fmt}')`;
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(' or ')}regex used for validation is '${fmt}')`;
}

const fullMatch = (fmt: string, s: string): boolean => new RegExp(`^${fmt}$`).test(s);

/** validation.IsQualifiedName, the label-key rule. */
function qualifiedNameErrors(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split('/');
  let name: string;
  if (parts.length === 1) {
    name = value;
  } else if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    name = parts[1] ?? '';
    if (prefix.length === 0) errs.push('prefix part must be non-empty');
    else errs.push(...dns1123SubdomainErrors(prefix).map((e) => `prefix part ${e}`));
  } else {
    return [`a qualified name ${regexError(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, 'MyName', 'my.name', '123-abc')} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`];
  }
  if (name.length === 0) errs.push('name part must be non-empty');
  else if (utf8Length(name) > 63) errs.push('name part must be no more than 63 characters');
  if (!fullMatch(QUALIFIED_NAME_FMT, name)) {
    errs.push(`name part ${regexError(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, 'MyName', 'my.name', '123-abc')}`);
  }
  return errs;
}

function dns1123SubdomainErrors(value: string): string[] {
  const errs: string[] = [];
  if (utf8Length(value) > 253) errs.push('must be no more than 253 characters');
  if (!fullMatch(DNS1123_SUBDOMAIN_FMT, value)) errs.push(regexError(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, 'example.com'));
  return errs;
}

function labelValueErrors(value: string): string[] {
  const errs: string[] = [];
  if (utf8Length(value) > 63) errs.push('must be no more than 63 characters');
  if (!fullMatch(LABEL_VALUE_FMT, value)) errs.push(regexError(LABEL_VALUE_MSG, LABEL_VALUE_FMT, 'MyValue', 'my_value', '12345'));
  return errs;
}

// Go measures strings in bytes.
const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/** The error of validateLabelKey, or undefined. */
function labelKeyError(key: string, path: string): string | undefined {
  const errs = qualifiedNameErrors(key);
  return errs.length ? invalidValue(path, key, errs.join('; ')) : undefined;
}

/** labels.NewRequirement (with no field path): the requirement, or the aggregated error message. */
function newRequirement(key: string, op: Operator, values: string[]): Requirement | string {
  const errs: string[] = [];
  const keyErr = labelKeyError(key, 'key');
  if (keyErr) errs.push(keyErr);
  switch (op) {
    case 'in': case 'notin':
      if (values.length === 0) errs.push(invalidValue('values', values, "for 'in', 'notin' operators, values set can't be empty"));
      break;
    case '=': case '==': case '!=':
      if (values.length !== 1) errs.push(invalidValue('values', values, 'exact-match compatibility requires one single value'));
      break;
    case 'exists': case '!':
      if (values.length !== 0) errs.push(invalidValue('values', values, 'values set must be empty for exists and does not exist'));
      break;
    case 'gt': case 'lt':
      if (values.length !== 1) errs.push(invalidValue('values', values, "for 'Gt', 'Lt' operators, exactly one value is required"));
      values.forEach((v, i) => {
        if (parseInt64(v) === undefined) errs.push(invalidValue(`values[${i}]`, v, "for 'Gt', 'Lt' operators, the value must be an integer"));
      });
      break;
  }
  values.forEach((v, i) => {
    const valueErrs = labelValueErrors(v);
    if (valueErrs.length) errs.push(invalidValue(`values[${i}][${key}]`, v, valueErrs.join('; ')));
  });
  return errs.length ? aggregate(errs) : { key, op, values };
}

// ---------------------------------------------------------------------------
// The label selector string grammar (labels.Parse): a lexer and a
// recursive-descent parser, kept close to the Go code so error messages match.

type Token = 'error' | 'eos' | ')' | ',' | '!' | '==' | '=' | '>' | 'id' | 'in' | '<' | '!=' | 'notin' | '(';

const LITERAL_TOKENS: Readonly<Record<string, Token>> = {
  ')': ')', ',': ',', '!': '!', '==': '==', '=': '=', '>': '>', 'in': 'in', '<': '<', '!=': '!=', 'notin': 'notin', '(': '(',
};

interface Item { tok: Token; lit: string }

const isWhitespace = (ch: string): boolean => ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n';
const isSpecial = (ch: string): boolean => ch.length === 1 && '=!(),><'.includes(ch);

function literalToken(s: string): Token | undefined {
  return Object.hasOwn(LITERAL_TOKENS, s) ? LITERAL_TOKENS[s] : undefined;
}

/** Splits the selector into tokens; a NUL character ends the input, as in Go. */
function lex(s: string): Item[] {
  let pos = 0;
  const read = (): string => (pos < s.length ? s[pos++] ?? '\0' : '\0');
  const items: Item[] = [];
  for (;;) {
    let ch = read();
    while (isWhitespace(ch)) ch = read();
    if (ch === '\0') {
      items.push({ tok: 'eos', lit: '' });
      return items;
    }
    pos--;
    items.push(isSpecial(ch) ? scanSpecial() : scanIdentifier());
  }

  function scanIdentifier(): Item {
    let buf = '';
    for (;;) {
      const ch = read();
      if (ch === '\0') break;
      if (isSpecial(ch) || isWhitespace(ch)) {
        pos--;
        break;
      }
      buf += ch;
    }
    return { tok: literalToken(buf) ?? 'id', lit: buf };
  }

  // Longest run of special characters that still forms an operator.
  function scanSpecial(): Item {
    let buf = '';
    let last: Item | undefined;
    for (;;) {
      const ch = read();
      if (ch === '\0') break;
      if (!isSpecial(ch)) {
        pos--;
        break;
      }
      buf += ch;
      const tok = literalToken(buf);
      if (tok) {
        last = { tok, lit: buf };
      } else if (last) {
        pos--;
        break;
      }
    }
    return last ?? { tok: 'error', lit: `error expected: keyword found '${buf}'` };
  }
}

class LabelParser {
  private pos = 0;

  constructor(private readonly items: Item[]) {}

  // In value context the keywords "in" and "notin" are plain identifiers.
  private lookahead(values: boolean): Item {
    return this.asContext(this.items[this.pos] ?? { tok: 'eos', lit: '' }, values);
  }

  private consume(values: boolean): Item {
    const item = this.lookahead(values);
    this.pos++;
    return item;
  }

  private asContext(item: Item, values: boolean): Item {
    return values && (item.tok === 'in' || item.tok === 'notin') ? { tok: 'id', lit: item.lit } : item;
  }

  parse(): Requirement[] {
    const reqs: Requirement[] = [];
    for (;;) {
      const { tok, lit } = this.lookahead(true);
      if (tok === 'eos') return reqs;
      if (tok !== 'id' && tok !== '!') throw new Error(`found '${lit}', expected: !, identifier, or 'end of string'`);
      const r = this.parseRequirement();
      if (typeof r === 'string') throw new Error(`unable to parse requirement: ${r}`);
      reqs.push(r);
      const next = this.consume(true);
      if (next.tok === 'eos') return reqs;
      if (next.tok !== ',') throw new Error(`found '${next.lit}', expected: ',' or 'end of string'`);
      const after = this.lookahead(true);
      if (after.tok !== 'id' && after.tok !== '!') throw new Error(`found '${after.lit}', expected: identifier after ','`);
    }
  }

  /** A requirement, or the message of the error to wrap. */
  private parseRequirement(): Requirement | string {
    let op: Operator | undefined;
    let { tok, lit } = this.consume(true);
    if (tok === '!') {
      op = '!';
      ({ tok, lit } = this.consume(true));
    }
    if (tok !== 'id') return `found '${lit}', expected: identifier`;
    const key = lit;
    const keyErr = labelKeyError(key, '<nil>');
    if (keyErr) return keyErr;
    const next = this.lookahead(true).tok;
    if (op === undefined && (next === 'eos' || next === ',')) op = 'exists';
    if (op === 'exists' || op === '!') return newRequirement(key, op, []);

    const opItem = this.consume(false);
    const binary = binaryOperator(opItem.tok);
    if (!binary) return `found '${opItem.lit}', expected: ${BINARY_OPERATORS.join(', ')}`;
    const values = binary === 'in' || binary === 'notin' ? this.parseValues() : this.parseExactValue();
    if (typeof values === 'string') return values;
    return newRequirement(key, binary, [...new Set(values)].sort());
  }

  private parseValues(): string[] | string {
    const open = this.consume(true);
    if (open.tok !== '(') return `found '${open.lit}' expected: '('`;
    const { tok, lit } = this.lookahead(true);
    if (tok === ')') {
      this.consume(true);
      return [''];
    }
    if (tok !== 'id' && tok !== ',') return `found '${lit}', expected: ',', ')' or identifier`;
    const values = this.parseIdentifiersList();
    if (typeof values === 'string') return values;
    if (this.consume(true).tok !== ')') return `found '${lit}', expected: ')'`;
    return values;
  }

  // "(a,,b)", "(,a)" and "(a,)" all contain the empty value.
  private parseIdentifiersList(): string[] | string {
    const values: string[] = [];
    for (;;) {
      const { tok, lit } = this.consume(true);
      if (tok === 'id') {
        values.push(lit);
        const next = this.lookahead(true);
        if (next.tok === ',') continue;
        if (next.tok === ')') return values;
        return `found '${next.lit}', expected: ',' or ')'`;
      }
      if (tok !== ',') return `found '${lit}', expected: ',', or identifier`;
      if (values.length === 0) values.push('');
      const next = this.lookahead(true).tok;
      if (next === ')') {
        values.push('');
        return values;
      }
      if (next === ',') values.push('');
    }
  }

  private parseExactValue(): string[] | string {
    const next = this.lookahead(true).tok;
    if (next === 'eos' || next === ',') return [''];
    const { tok, lit } = this.consume(true);
    return tok === 'id' ? [lit] : `found '${lit}', expected: identifier`;
  }
}

function binaryOperator(tok: Token): Operator | undefined {
  switch (tok) {
    case 'in': return 'in';
    case 'notin': return 'notin';
    case '=': return '=';
    case '==': return '==';
    case '!=': return '!=';
    case '>': return 'gt';
    case '<': return 'lt';
    default: return undefined;
  }
}

/**
 * Parse a labelSelector query string (=, ==, !=, in (a,b), notin (a,b), key,
 * !key, >, <; comma = AND). Throws StatusError 400 BadRequest with
 * apimachinery's message on a syntax error.
 */
export function parseLabelSelector(s: string | undefined): Matcher {
  if (!s) return everything;
  try {
    return matcherFor(new LabelParser(lex(s)).parse());
  } catch (err) {
    if (err instanceof StatusError) throw err;
    throw badRequest((err as Error).message);
  }
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

const SELECTOR_OPERATORS: Readonly<Record<string, Operator>> = { In: 'in', NotIn: 'notin', Exists: 'exists', DoesNotExist: '!' };

/**
 * From a metav1.LabelSelector (used by Job.spec.selector), as
 * metav1.LabelSelectorAsSelector builds it: an absent selector matches nothing,
 * an empty one everything. Throws 400 BadRequest for an invalid selector
 * (validation normally rejects those before they are stored).
 */
export function labelSelectorMatcher(sel: LabelSelector | null | undefined): Matcher {
  if (sel === undefined || sel === null) return nothing;
  const reqs: Requirement[] = [];
  const add = (r: Requirement | string): void => {
    if (typeof r === 'string') throw badRequest(r);
    reqs.push(r);
  };
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) add(newRequirement(k, '=', [v]));
  for (const expr of sel.matchExpressions ?? []) {
    const op = Object.hasOwn(SELECTOR_OPERATORS, expr.operator) ? SELECTOR_OPERATORS[expr.operator] : undefined;
    if (!op) throw badRequest(`${JSON.stringify(expr.operator)} is not a valid label selector operator`);
    add(newRequirement(expr.key, op, [...(expr.values ?? [])]));
  }
  return matcherFor(reqs);
}

// ---------------------------------------------------------------------------
// Field selectors (fields.ParseSelector + the kind's field-label conversion)

interface FieldTerm {
  field: string;
  equal: boolean;
  value: string;
}

/** Comma-separated terms; a backslash escapes the next character. */
function splitTerms(selector: string): string[] {
  if (selector === '') return [];
  const terms: string[] = [];
  let start = 0;
  let inSlash = false;
  // Both delimiters are ASCII, so scanning UTF-16 units finds what Go's rune loop finds.
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (inSlash) inSlash = false;
    else if (c === '\\') inSlash = true;
    else if (c === ',') {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

/** The first "!=", "==" or "=" splits a term; the lhs cannot be escaped. */
function splitTerm(term: string): { lhs: string; op: string; rhs: string } | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const op of ['!=', '==', '=']) {
      if (term.startsWith(op, i)) return { lhs: term.slice(0, i), op, rhs: term.slice(i + op.length) };
    }
  }
  return undefined;
}

function unescapeValue(s: string): string {
  let out = '';
  let inSlash = false;
  for (const c of s) {
    if (inSlash) {
      if (c !== '\\' && c !== ',' && c !== '=') throw new Error(`invalid field selector: invalid escape sequence: \\${c}`);
      out += c;
      inSlash = false;
    } else if (c === '\\') {
      inSlash = true;
    } else if (c === ',' || c === '=') {
      // Go prints the rune with %v: its code point.
      throw new Error(`invalid field selector: unescapedRune character in value: ${c.codePointAt(0)}`);
    } else {
      out += c;
    }
  }
  if (inSlash) throw new Error('invalid field selector: invalid escape sequence: \\');
  return out;
}

/** fields.ParseSelector: terms sorted, then split and unescaped. */
function parseFieldTerms(selector: string): FieldTerm[] {
  const terms: FieldTerm[] = [];
  for (const part of splitTerms(selector).sort()) {
    if (part === '') continue;
    const split = splitTerm(part);
    if (!split) throw new Error(`invalid selector: '${selector}'; can't understand '${part}'`);
    terms.push({ field: split.lhs, equal: split.op !== '!=', value: unescapeValue(split.rhs) });
  }
  return terms;
}

type FieldGetter = (obj: Record<string, unknown>) => string;

interface KindFields {
  /** Field label → value in the object (labels the kind accepts). */
  fields: Readonly<Record<string, FieldGetter>>;
  /** Labels renamed by the conversion function. */
  aliases?: Readonly<Record<string, string>>;
  unsupported: (label: string) => string;
}

/** The value at a path of object keys, or undefined. */
function at(obj: Record<string, unknown>, ...path: string[]): unknown {
  let cur: unknown = obj;
  for (const p of path) {
    if (typeof cur !== 'object' || cur === null || Array.isArray(cur) || !Object.hasOwn(cur, p)) return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
}

// A missing field reads as "", like fields.Set.Get.
const str = (...path: string[]): FieldGetter => (obj) => {
  const v = at(obj, ...path);
  return typeof v === 'string' ? v : '';
};
const absent: FieldGetter = () => '';

const META_FIELDS = { 'metadata.name': str('metadata', 'name'), 'metadata.namespace': str('metadata', 'namespace') };
const notSupported = (label: string): string => `field label not supported: ${label}`;
// runtime.DefaultMetaV1FieldSelectorConversion, for kinds without a conversion function.
const notKnown = (label: string): string => `${JSON.stringify(label)} is not a known field selector: only "metadata.name", "metadata.namespace"`;

// The internal Pod keeps only podIPs; a v1 podIP alone is converted into it.
const podIP: FieldGetter = (obj) => {
  const ips = at(obj, 'status', 'podIPs');
  const first: unknown = Array.isArray(ips) ? ips[0] : undefined;
  const ip = typeof first === 'object' && first !== null ? (first as Record<string, unknown>).ip : undefined;
  if (typeof ip === 'string') return ip;
  return str('status', 'podIP')(obj);
};

const BUILTIN_FIELDS: Readonly<Record<string, KindFields>> = {
  Pod: {
    fields: {
      ...META_FIELDS,
      'spec.nodeName': str('spec', 'nodeName'),
      'spec.restartPolicy': str('spec', 'restartPolicy'),
      'spec.schedulerName': str('spec', 'schedulerName'),
      'spec.serviceAccountName': str('spec', 'serviceAccountName'),
      'spec.hostNetwork': (obj) => String(at(obj, 'spec', 'hostNetwork') === true),
      'status.phase': str('status', 'phase'),
      'status.podIP': podIP,
      'status.podIPs': absent, // accepted by the conversion but not in the field set
      'status.nominatedNodeName': str('status', 'nominatedNodeName'),
    },
    aliases: { 'spec.host': 'spec.nodeName' },
    unsupported: notSupported,
  },
  Event: {
    fields: {
      ...META_FIELDS,
      'involvedObject.kind': str('involvedObject', 'kind'),
      'involvedObject.namespace': str('involvedObject', 'namespace'),
      'involvedObject.name': str('involvedObject', 'name'),
      'involvedObject.uid': str('involvedObject', 'uid'),
      'involvedObject.apiVersion': str('involvedObject', 'apiVersion'),
      'involvedObject.resourceVersion': str('involvedObject', 'resourceVersion'),
      'involvedObject.fieldPath': str('involvedObject', 'fieldPath'),
      'reason': str('reason'),
      'reportingComponent': str('reportingComponent'),
      'source': (obj) => str('source', 'component')(obj) || str('reportingComponent')(obj),
      'type': str('type'),
    },
    unsupported: notSupported,
  },
  // Namespaces have no metadata.namespace; the conversion rejects it.
  Namespace: {
    fields: { 'metadata.name': str('metadata', 'name'), 'status.phase': str('status', 'phase') },
    unsupported: notSupported,
  },
  Secret: { fields: { ...META_FIELDS, type: str('type') }, unsupported: notSupported },
  Job: {
    fields: {
      ...META_FIELDS,
      'status.successful': (obj) => {
        const n = at(obj, 'status', 'succeeded');
        return String(typeof n === 'number' ? n : 0);
      },
    },
    unsupported: (label) => `field label ${JSON.stringify(label)} not supported for batchv1.Job`,
  },
};

const DEFAULT_BUILTIN: KindFields = { fields: META_FIELDS, unsupported: notKnown };

export interface FieldSelectorOptions {
  /** Custom resources: false for cluster-scoped ones, which reject metadata.namespace. Default true. */
  namespaced?: boolean;
  /**
   * Custom resources: the version's selectableFields jsonPaths (".spec.color"),
   * selectable as "spec.color" (CRD field selectors, GA in v1.32).
   */
  selectableFields?: string[];
}

function customResourceFields(opts: FieldSelectorOptions): KindFields {
  const fields: Record<string, FieldGetter> = { 'metadata.name': str('metadata', 'name') };
  if (opts.namespaced ?? true) fields['metadata.namespace'] = str('metadata', 'namespace');
  for (const jsonPath of opts.selectableFields ?? []) {
    const label = jsonPath.replace(/^\./, '');
    fields[label] = (obj) => {
      // Selectable fields are strings, integers or booleans.
      const v = at(obj, ...label.split('.'));
      return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : '';
    };
  }
  return { fields, unsupported: notSupported };
}

function kindFields(kind: string, builtin: boolean, opts: FieldSelectorOptions): KindFields {
  if (!builtin) return customResourceFields(opts);
  return Object.hasOwn(BUILTIN_FIELDS, kind) ? BUILTIN_FIELDS[kind] ?? DEFAULT_BUILTIN : DEFAULT_BUILTIN;
}

/**
 * Parse a fieldSelector (=, ==, != ; comma = AND; "\," "\=" "\\" escape a
 * value) for a kind, accepting only the field labels the real apiserver
 * accepts for it. Throws 400 BadRequest with apimachinery's messages.
 */
export function parseFieldSelector(s: string | undefined, kind: string, builtin: boolean, opts: FieldSelectorOptions = {}): Matcher {
  if (!s) return everything;
  const spec = kindFields(kind, builtin, opts);
  let terms: FieldTerm[];
  try {
    terms = parseFieldTerms(s);
  } catch (err) {
    throw badRequest((err as Error).message);
  }
  const checks = terms.map((t) => {
    const label = spec.aliases && Object.hasOwn(spec.aliases, t.field) ? spec.aliases[t.field] ?? t.field : t.field;
    const get = Object.hasOwn(spec.fields, label) ? spec.fields[label] : undefined;
    if (!get) throw badRequest(spec.unsupported(t.field));
    return (obj: Record<string, unknown>): boolean => (get(obj) === t.value) === t.equal;
  });
  if (checks.length === 0) return everything;
  return (obj) => checks.every((check) => check(obj as unknown as Record<string, unknown>));
}

/**
 * Values of a field selector's metadata.name / metadata.namespace equality
 * terms, so the server can answer `metadata.name=x` without scanning. Never
 * throws: an invalid selector simply yields no hints.
 */
export function fieldSelectorIndexHints(s: string | undefined): { name?: string; namespace?: string } {
  const hints: { name?: string; namespace?: string } = {};
  if (!s) return hints;
  let terms: FieldTerm[];
  try {
    terms = parseFieldTerms(s);
  } catch {
    return hints;
  }
  for (const t of terms) {
    if (!t.equal) continue;
    if (t.field === 'metadata.name' && hints.name === undefined) hints.name = t.value;
    if (t.field === 'metadata.namespace' && hints.namespace === undefined) hints.namespace = t.value;
  }
  return hints;
}
