// Validation of custom resources against their structural schema, worded the
// way kube-apiserver 1.32 words it.
//
// The apiserver validates with kube-openapi's SchemaValidator and turns its
// results into field.Errors in kubeOpenAPIResultToFieldErrors
// (apiextensions-apiserver pkg/apiserver/validation/validation.go). Here ajv
// does the checking and its errors are mapped onto the same field.Error
// shapes, so that Status causes, messages and field paths match:
//   - kube-openapi paths: properties ".name", array items "[i]", map values ".key"
//     (not "[key]"); the root object's children have no leading dot;
//   - messages "<path> in body must be of type integer: \"string\"" etc. come
//     from kube-openapi's errors/schema.go;
//   - field.Error.ErrorBody renders bad values with Go's fmt (strings %q,
//     numbers %v, anything else %#v) — see renderBadValue.
// Embedded-resource checks (schema/objectmeta/validation.go) and
// x-kubernetes-list-type uniqueness (schema/listtype/validation.go) follow, as
// in the custom resource strategy.

import { isIP } from 'node:net';
import { Ajv } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { JSONSchemaProps, StatusCause } from '../types.js';

type JsonObject = Record<string, unknown>;

function isJsonObject(x: unknown): x is JsonObject {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

// ---------------------------------------------------------------------------
// Go value rendering (fmt %q, %v, %#v; encoding/json) as used in messages.

const GO_PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u;
const GO_ESCAPES: Record<string, string> = {
  '"': '\\"', '\\': '\\\\', '\x07': '\\a', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\v': '\\v',
};

/** strconv.Quote: what %q prints. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0;
    const escape = GO_ESCAPES[ch];
    if (escape !== undefined) out += escape;
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (cp < 0x80 || GO_PRINTABLE.test(ch)) out += ch;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += `\\U${cp.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

/** %v of a float64: shortest digits, exponent form below 1e-4 and from 1e6 on. */
export function goFloat(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? '+Inf' : '-Inf';
  if (n === 0) return Object.is(n, -0) ? '-0' : '0';
  const [mantissa = '', exponent = '0'] = n.toExponential().split('e');
  const exp = Number(exponent);
  if (exp < -4 || exp >= 6) {
    const digits = String(Math.abs(exp)).padStart(2, '0');
    return `${mantissa}e${exp < 0 ? '-' : '+'}${digits}`;
  }
  return String(n);
}

/**
 * JSON numbers decode to int64 when integral and float64 otherwise on the Go
 * side; this prints a number the way %v prints the resulting Go value.
 */
export function goNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : goFloat(n);
}

/** %#v of a decoded JSON value (map[string]interface{} and friends). */
export function goSharpV(v: unknown): string {
  if (v === null || v === undefined) return 'interface {}(nil)';
  if (typeof v === 'string') return goQuote(v);
  if (typeof v === 'number') return goNumber(v);
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[]interface {}{${v.map(goSharpV).join(', ')}}`;
  const o = v as JsonObject;
  const entries = Object.keys(o).sort().map((k) => `${goQuote(k)}:${goSharpV(o[k])}`);
  return `map[string]interface {}{${entries.join(', ')}}`;
}

/** encoding/json output: sorted keys and HTML-safe escaping. */
export function goJSON(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(goJSON).join(',')}]`;
  if (isJsonObject(v)) {
    return `{${Object.keys(v).sort().map((k) => `${goJSON(k)}:${goJSON(v[k])}`).join(',')}}`;
  }
  return (JSON.stringify(v) ?? 'null')
    .replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

// ---------------------------------------------------------------------------
// field.Error equivalents.

/** A bad value that is already Go-formatted text (e.g. a typed Go struct). */
export class GoLiteral {
  constructor(readonly text: string) {}
}

const OMIT_VALUE = Symbol('omitValue');

const ERROR_TYPE_TEXT: Record<string, string> = {
  FieldValueNotFound: 'Not found',
  FieldValueRequired: 'Required value',
  FieldValueDuplicate: 'Duplicate value',
  FieldValueInvalid: 'Invalid value',
  FieldValueNotSupported: 'Unsupported value',
  FieldValueForbidden: 'Forbidden',
  FieldValueTooLong: 'Too long',
  FieldValueTooMany: 'Too many',
  InternalError: 'Internal error',
  FieldValueTypeInvalid: 'Invalid value',
};

// These error types never show their bad value (field.Error.ErrorBody).
const VALUELESS = new Set(['FieldValueRequired', 'FieldValueForbidden', 'FieldValueTooLong', 'InternalError']);

function renderBadValue(v: unknown): string {
  if (v instanceof GoLiteral) return v.text;
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return goQuote(v);
  if (typeof v === 'number') return goNumber(v);
  if (typeof v === 'boolean') return String(v);
  return goSharpV(v);
}

function fieldError(reason: string, field: string, badValue: unknown, detail: string): StatusCause {
  let message = ERROR_TYPE_TEXT[reason] ?? reason;
  if (!VALUELESS.has(reason) && badValue !== OMIT_VALUE) message += `: ${renderBadValue(badValue)}`;
  if (detail) message += `: ${detail}`;
  return { reason, message, field };
}

/** Builders mirroring k8s.io/apimachinery/pkg/util/validation/field. */
export const fieldErrors = {
  required: (field: string, detail = ''): StatusCause => fieldError('FieldValueRequired', field, '', detail),
  invalid: (field: string, value: unknown, detail: string): StatusCause => fieldError('FieldValueInvalid', field, value, detail),
  typeInvalid: (field: string, value: unknown, detail: string): StatusCause =>
    fieldError('FieldValueTypeInvalid', field, value, detail),
  notSupported: (field: string, value: unknown, valid: string[]): StatusCause =>
    fieldError('FieldValueNotSupported', field, value,
      valid.length ? `supported values: ${valid.map(goQuote).join(', ')}` : ''),
  forbidden: (field: string, detail: string): StatusCause => fieldError('FieldValueForbidden', field, '', detail),
  // 1.32 reworded TooLong to bytes ("Too long: may not be more than 63 bytes").
  tooLong: (field: string, max: number): StatusCause =>
    fieldError('FieldValueTooLong', field, '', max >= 0 ? `may not be more than ${max} ${max === 1 ? 'byte' : 'bytes'}` : 'value is too long'),
  tooMany: (field: string, actual: number, max: number): StatusCause =>
    fieldError('FieldValueTooMany', field, actual >= 0 ? actual : OMIT_VALUE,
      max >= 0 ? `must have at most ${max} items` : 'has too many items'),
  duplicate: (field: string, value: unknown): StatusCause => fieldError('FieldValueDuplicate', field, value, ''),
};

// field.Path rendering: Child adds ".name", Index "[i]", Key "[key]"; a nil
// path prints as "<nil>".
const childPath = (p: string | null, name: string): string => (p === null ? name : `${p}.${name}`);
const indexPath = (p: string | null, i: number | string): string => `${p ?? ''}[${i}]`;

// ---------------------------------------------------------------------------
// Formats kept by StripUnsupportedFormatsPostProcess, validated like strfmt.

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME_RE = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2})(:(\d{2})(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$/;
const GO_DURATION_RE = /^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$/;
const SCALA_DURATION_RE = /^(\d+)\s*(ns|nanos?|nanoseconds?|us|µs|micros?|microseconds?|ms|millis?|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?)$/;
const QUANTITY_RE = /^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(\d+(\.\d*)?|\.\d+)))?$/;
const RGB_PART = '\\s*(0|[1-9]\\d?|1\\d\\d|2[0-4]\\d|25[0-5])\\s*';

function isValidDate(s: string): boolean {
  const m = DATE_RE.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}

function isValidCidr(s: string): boolean {
  const [ip, bits, ...rest] = s.split('/');
  if (ip === undefined || bits === undefined || rest.length || !/^\d+$/.test(bits)) return false;
  const family = isIP(ip);
  return family !== 0 && Number(bits) <= (family === 4 ? 32 : 128);
}

const STRING_FORMATS: Record<string, (s: string) => boolean> = {
  bsonobjectid: (s) => /^[0-9a-fA-F]{24}$/.test(s),
  uri: (s) => s.startsWith('/') || (URL.canParse(s) && /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(s)),
  email: (s) => /^[^\s@<>]+@[^\s@<>]+$/.test(s) || /^[^<>]*<[^\s@<>]+@[^\s@<>]+>$/.test(s),
  hostname: (s) => s.length <= 255 && /^([a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*\.?$/.test(s),
  ipv4: (s) => isIP(s) !== 0 && s.includes('.'),
  ipv6: (s) => isIP(s) !== 0 && s.includes(':'),
  cidr: isValidCidr,
  mac: (s) => /^([0-9a-fA-F]{2}([:-])){5}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{2}([:-])){7}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{2}([:-])){19}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{4}\.){2}[0-9a-fA-F]{4}$/.test(s),
  uuid: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s),
  uuid3: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s),
  uuid4: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i.test(s),
  uuid5: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i.test(s),
  isbn: (s) => /^(\d{9}[\dX]|\d{13})$/.test(s.replace(/[\s-]/g, '')),
  isbn10: (s) => /^\d{9}[\dX]$/.test(s.replace(/[\s-]/g, '')),
  isbn13: (s) => /^\d{13}$/.test(s.replace(/[\s-]/g, '')),
  creditcard: (s) => /^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$/.test(s.replace(/\D/g, '')),
  ssn: (s) => /^\d{3}[- ]?\d{2}[- ]?\d{4}$/.test(s),
  hexcolor: (s) => /^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/.test(s),
  rgbcolor: (s) => new RegExp(`^rgb\\(${RGB_PART},${RGB_PART},${RGB_PART}\\)$`).test(s),
  byte: (s) => s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s),
  password: () => true,
  date: isValidDate,
  duration: (s) => s === '0' || GO_DURATION_RE.test(s) || SCALA_DURATION_RE.test(s.trim()),
  datetime: (s) => {
    const m = DATE_TIME_RE.exec(s);
    return m !== null && isValidDate(m[1] ?? '') && Number(m[2]) < 24 && Number(m[3]) < 60 && Number(m[5] ?? 0) < 61;
  },
  quantity: (s) => QUANTITY_RE.test(s),
};

/** The format a node keeps after StripUnsupportedFormatsPostProcess, or "". */
function keptFormat(node: JSONSchemaProps): string {
  const format = node.format;
  if (!format) return '';
  // int-or-string nodes have two types, which the stripper treats like untyped.
  const type = node['x-kubernetes-int-or-string'] ? '' : (node.type ?? '');
  switch (type) {
    case '':
    case 'string': return format.replaceAll('-', '') in STRING_FORMATS ? format : '';
    case 'integer': return format === 'int32' || format === 'int64' ? format : '';
    case 'number': return format === 'float' || format === 'double' ? format : '';
    default: return '';
  }
}

// ---------------------------------------------------------------------------
// Regular expressions: CRD patterns are Go (RE2) syntax.

/** Compiles a Go regexp as a JS RegExp, or returns the reason it cannot. */
export function compileGoPattern(pattern: string): RegExp | Error {
  let body = pattern;
  let flags = '';
  const inline = /^\(\?([imsU]+)\)/.exec(body);
  if (inline) {
    flags = [...(inline[1] ?? '')].filter((f) => 'ims'.includes(f)).join('');
    body = body.slice(inline[0].length);
  }
  body = body.replace(/\\A/g, '^').replace(/\\z/g, '$')
    .replace(/\[:alpha:\]/g, 'a-zA-Z').replace(/\[:digit:\]/g, '0-9').replace(/\[:alnum:\]/g, 'a-zA-Z0-9')
    .replace(/\[:upper:\]/g, 'A-Z').replace(/\[:lower:\]/g, 'a-z').replace(/\[:space:\]/g, '\\s')
    .replace(/\[:xdigit:\]/g, '0-9A-Fa-f');
  try {
    return new RegExp(body, flags);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

function goRegExp(pattern: string): { test: (s: string) => boolean } {
  const rx = compileGoPattern(pattern);
  if (rx instanceof RegExp) return rx;
  // CRD validation rejects such patterns; never fail a value because of one.
  return { test: () => true, toString: () => `invalid:${pattern}` } as { test: (s: string) => boolean };
}
goRegExp.code = 'goRegExp';

// ---------------------------------------------------------------------------
// Schema conversion and compilation.

const ajv = new Ajv({
  strict: false,
  allErrors: true,
  verbose: true,
  validateSchema: false,
  addUsedSchema: false,
  unicodeRegExp: false,
  code: { regExp: goRegExp },
});
for (const [name, check] of Object.entries(STRING_FORMATS)) ajv.addFormat(name, { type: 'string', validate: check });

interface Compiled {
  run: ValidateFunction;
  /** Converted ajv node → the CRD schema node it came from. */
  origin: WeakMap<object, JSONSchemaProps>;
  root: JsonObject;
}

const compiledSchemas = new WeakMap<JSONSchemaProps, Compiled>();

function schemaTypes(node: JSONSchemaProps): string[] {
  if (node['x-kubernetes-int-or-string']) return ['integer', 'string'];
  return node.type ? [node.type] : [];
}

const COPIED_KEYWORDS = [
  'minLength', 'maxLength', 'pattern', 'minItems', 'maxItems', 'uniqueItems',
  'minProperties', 'maxProperties', 'multipleOf', 'required', 'enum',
] as const;

/** OpenAPI v3 (CRD flavour) → the JSON Schema ajv understands. */
function toAjv(node: JSONSchemaProps, origin: WeakMap<object, JSONSchemaProps>): JsonObject {
  const out: JsonObject = {};
  origin.set(out, node);
  const types = schemaTypes(node);
  if (types.length) out.type = node.nullable ? [...types, 'null'] : types;
  for (const k of COPIED_KEYWORDS) if (node[k] !== undefined) out[k] = node[k];
  // OpenAPI v3.0 has boolean exclusive flags; JSON Schema has numeric limits.
  if (node.minimum !== undefined) out[node.exclusiveMinimum ? 'exclusiveMinimum' : 'minimum'] = node.minimum;
  if (node.maximum !== undefined) out[node.exclusiveMaximum ? 'exclusiveMaximum' : 'maximum'] = node.maximum;
  const format = keptFormat(node).replaceAll('-', '');
  if (format in STRING_FORMATS) out.format = format;
  if (node.properties) {
    out.properties = Object.fromEntries(Object.entries(node.properties).map(([k, v]) => [k, toAjv(v, origin)]));
  }
  if (node.additionalProperties === false) out.additionalProperties = false;
  else if (isJsonObject(node.additionalProperties)) out.additionalProperties = toAjv(node.additionalProperties, origin);
  if (isJsonObject(node.items)) out.items = toAjv(node.items, origin);
  for (const k of ['allOf', 'anyOf', 'oneOf'] as const) {
    const branches = node[k];
    if (Array.isArray(branches)) out[k] = branches.map((b) => toAjv(b, origin));
  }
  if (node.not) out.not = toAjv(node.not, origin);
  return out;
}

function compile(schema: JSONSchemaProps): Compiled {
  let compiled = compiledSchemas.get(schema);
  if (!compiled) {
    const origin = new WeakMap<object, JSONSchemaProps>();
    const root = toAjv(schema, origin);
    const run = ajv.compile(root);
    ajv.removeSchema(root); // the WeakMap owns the validator, not ajv's cache
    compiled = { run, origin, root };
    compiledSchemas.set(schema, compiled);
  }
  return compiled;
}

// ---------------------------------------------------------------------------
// Mapping ajv errors to causes.

// kube-openapi validates each node in this order: type, allOf/anyOf/oneOf/not,
// string, format, number, array items then item counts, enum, property counts,
// object properties, required. Causes are sorted to follow that walk.
const RANK = {
  type: 0, combinator: 1, string: 2, format: 3, number: 4, arrayChildren: 4.5, items: 5,
  enum: 6, propertyCount: 7, forbiddenProperty: 7.2, objectChildren: 7.5, required: 8,
} as const;

interface Located {
  cause: StatusCause;
  node: string[]; // instance path segments
  rank: number;
}

function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** kube-openapi's path for a location: "spec.items[0].name", map keys as ".key". */
function openapiPath(data: unknown, segments: string[]): string {
  let path = '';
  let cur: unknown = data;
  for (const seg of segments) {
    if (Array.isArray(cur)) {
      path += `[${seg}]`;
      cur = cur[Number(seg)];
    } else {
      path = path ? `${path}.${seg}` : seg;
      cur = isJsonObject(cur) ? cur[seg] : undefined;
    }
  }
  return path;
}

/** The field of a kube-openapi error: fldPath.Child(name) with the leading "." trimmed. */
function errField(base: string | null, name: string): string {
  const trimmed = name.startsWith('.') ? name.slice(1) : name;
  if (trimmed === '') return base ?? '<nil>';
  return childPath(base, trimmed);
}

/** Go type name and strfmt format the type validator infers for a JSON value. */
function goSchemaInfo(data: unknown): { type: string; format: string } {
  if (typeof data === 'string') return { type: 'string', format: '' };
  if (typeof data === 'boolean') return { type: 'boolean', format: '' };
  if (typeof data === 'number') return Number.isInteger(data) ? { type: 'integer', format: 'int64' } : { type: 'number', format: 'float64' };
  if (Array.isArray(data)) return { type: 'array', format: '' };
  return { type: 'object', format: '' };
}

/**
 * kube-openapi's typeValidator, including its format quirks: returns the type
 * name and the bad value it reports, or null when it accepts the value.
 */
function goTypeError(node: JSONSchemaProps, data: unknown): { typeName: string; value: string } | null {
  const types = schemaTypes(node);
  const format = keptFormat(node);
  if (!types.length && !format) return null;
  if (data === null || data === undefined) {
    return types.length && !node.nullable ? { typeName: types.join(','), value: 'null' } : null;
  }
  const info = goSchemaInfo(data);
  const stringOrSlice = info.type === 'string' || info.type === 'array';
  const intForNumber = info.type === 'integer' && types.includes('number');
  if (!stringOrSlice && format && !(types.includes(info.type) || info.format === format || intForNumber)) {
    return { typeName: format, value: info.format };
  }
  if (!types.includes('number') && !types.includes('integer') && format && stringOrSlice) return null;
  if (!(types.includes(info.type) || intForNumber)) return { typeName: types.join(','), value: info.type };
  return null;
}

function enumValues(values: unknown[] | undefined): string[] {
  return (values ?? []).map((v) => (typeof v === 'string' ? v : goJSON(v)));
}

/**
 * minimum/maximum as kube-openapi applies them: an integral value (int64 in
 * Go) is compared with the bound truncated to an integer, and the message
 * prints the bound with the value's Go type.
 */
function boundCause(node: JSONSchemaProps, data: unknown, which: 'min' | 'max', field: string, path: string): StatusCause | null {
  const limit = which === 'min' ? node.minimum : node.maximum;
  if (typeof data !== 'number' || limit === undefined) return null;
  const exclusive = (which === 'min' ? node.exclusiveMinimum : node.exclusiveMaximum) === true;
  const integral = Number.isInteger(data);
  const bound = integral ? Math.trunc(limit) : limit;
  const fails = which === 'min' ? (exclusive ? data <= bound : data < bound) : (exclusive ? data >= bound : data > bound);
  if (!fails) return null;
  const relation = which === 'min'
    ? (exclusive ? 'greater than' : 'greater than or equal to')
    : (exclusive ? 'less than' : 'less than or equal to');
  return fieldErrors.invalid(field, data, `${path} in body should be ${relation} ${integral ? String(bound) : goFloat(bound)}`);
}

function multipleOfCause(node: JSONSchemaProps, data: unknown, field: string, path: string): StatusCause | null {
  const factor = node.multipleOf;
  if (typeof data !== 'number' || factor === undefined) return null;
  if (Number.isInteger(data)) {
    const f = Math.trunc(factor);
    if (f === 0 || data % f === 0) return null;
    return fieldErrors.invalid(field, data, `${path} in body should be a multiple of ${f}`);
  }
  return fieldErrors.invalid(field, data, `${path} in body should be a multiple of ${goFloat(factor)}`);
}

function combinatorMessage(keyword: string, path: string, detail = ''): string {
  const p = goQuote(path);
  switch (keyword) {
    case 'anyOf': return `${p} must validate at least one schema (anyOf)`;
    case 'oneOf': return `${p} must validate one and only one schema (oneOf). ${detail}`;
    case 'allOf': return `${p} must validate all the schemas (allOf)${detail}`;
    default: return `${p} must not validate the schema (not)`;
  }
}

class ErrorMapper {
  constructor(
    private readonly data: unknown,
    private readonly compiled: Compiled,
    private readonly base: string | null,
  ) {}

  /** A combinator failure is not a kube-openapi Validation error: its field is the base path. */
  combinatorCause(keyword: string, path: string, detail = ''): StatusCause {
    return fieldErrors.invalid(this.base ?? '<nil>', '', combinatorMessage(keyword, path, detail));
  }

  leaf(e: ErrorObject): Located | null {
    const node = pointerSegments(e.instancePath);
    const path = openapiPath(this.data, node);
    const field = errField(this.base, path);
    const schema = (e.parentSchema && this.compiled.origin.get(e.parentSchema)) || {};
    const data: unknown = e.data;
    const at = (cause: StatusCause | null, rank: number): Located | null => (cause ? { cause, node, rank } : null);
    const params = e.params as Record<string, unknown>;
    const count = (x: unknown): number => (Array.isArray(x) ? x.length : isJsonObject(x) ? Object.keys(x).length : 0);
    switch (e.keyword) {
      case 'type': {
        const bad = goTypeError(schema, data);
        return at(bad && fieldErrors.typeInvalid(field, bad.value,
          `${path} in body must be of type ${bad.typeName}: ${goQuote(bad.value)}`), RANK.type);
      }
      case 'required': {
        const missing = String(params.missingProperty);
        return at(fieldErrors.required(errField(this.base, `${path}.${missing}`)), RANK.required);
      }
      case 'enum':
        return at(fieldErrors.notSupported(field, data, enumValues(schema.enum)), RANK.enum);
      case 'minimum':
      case 'exclusiveMinimum':
        return at(boundCause(schema, data, 'min', field, path), RANK.number);
      case 'maximum':
      case 'exclusiveMaximum':
        return at(boundCause(schema, data, 'max', field, path), RANK.number);
      case 'multipleOf':
        return at(multipleOfCause(schema, data, field, path), RANK.number);
      case 'minLength':
        return at(fieldErrors.invalid(field, data, `${path} in body should be at least ${schema.minLength} chars long`), RANK.string);
      case 'maxLength':
        return at(fieldErrors.tooLong(field, schema.maxLength ?? -1), RANK.string);
      case 'pattern':
        return at(fieldErrors.invalid(field, data, `${path} in body should match '${schema.pattern}'`), RANK.string);
      case 'format':
        return at(fieldErrors.typeInvalid(field, data, `${path} in body must be of type ${schema.format}: ${goQuote(String(data))}`), RANK.format);
      case 'minItems':
        return at(fieldErrors.invalid(field, count(data), `${path} in body should have at least ${schema.minItems} items`), RANK.items);
      case 'maxItems':
        return at(fieldErrors.tooMany(field, count(data), schema.maxItems ?? -1), RANK.items);
      case 'uniqueItems':
        return at(fieldErrors.invalid(field, '', `${path} in body shouldn't contain duplicates`), RANK.items);
      case 'minProperties':
        return at(fieldErrors.invalid(field, count(data), `${path} in body should have at least ${schema.minProperties} properties`), RANK.propertyCount);
      case 'maxProperties':
        return at(fieldErrors.tooMany(field, count(data), schema.maxProperties ?? -1), RANK.propertyCount);
      case 'additionalProperties': {
        const key = String(params.additionalProperty);
        return at(fieldErrors.invalid(field, key, `${path}.${key} in body is a forbidden property`), RANK.forbiddenProperty);
      }
      case 'anyOf':
      case 'not':
        return at(this.combinatorCause(e.keyword, path), RANK.combinator);
      case 'oneOf': {
        const passing = params.passingSchemas;
        const detail = Array.isArray(passing) ? `Found ${passing.length} valid alternatives` : 'Found none valid';
        return at(this.combinatorCause('oneOf', path, detail), RANK.combinator);
      }
      default:
        return at(fieldErrors.invalid(field, '', e.message ?? e.keyword), RANK.type);
    }
  }
}

interface CombinatorGroup {
  keyword: 'allOf' | 'anyOf' | 'oneOf' | 'not';
  schemaSegments: string[]; // up to the schema node holding the combinator
  node: string[];
  summary?: ErrorObject;
  branches: Map<number, ErrorObject[]>;
}

const NAMED_CHILD = new Set(['properties', 'patternProperties']);
const DIRECT_CHILD = new Set(['items', 'additionalProperties']);

/**
 * Locates the outermost allOf/anyOf/oneOf/not an error lies under, by walking
 * its schema path; `depth` counts the instance levels down to that node.
 */
function outerCombinator(schemaPath: string): { segments: string[]; keyword: CombinatorGroup['keyword']; branch: number; depth: number; summary: boolean } | null {
  const segs = schemaPath.replace(/^#\/?/, '').split('/').map((s) => decodeURIComponent(s).replace(/~1/g, '/').replace(/~0/g, '~'));
  let depth = 0;
  for (let i = 0; i < segs.length;) {
    const kw = segs[i] ?? '';
    if (NAMED_CHILD.has(kw)) { depth++; i += 2; continue; }
    if (DIRECT_CHILD.has(kw)) { depth++; i += 1; continue; }
    if (kw === 'allOf' || kw === 'anyOf' || kw === 'oneOf' || kw === 'not') {
      const last = i === segs.length - 1;
      const branch = kw === 'not' ? 0 : Number(segs[i + 1]);
      return { segments: segs.slice(0, i), keyword: kw, branch, depth, summary: last };
    }
    return null;
  }
  return null;
}

function resolveAjvNode(root: JsonObject, segments: string[]): JsonObject | undefined {
  let cur: unknown = root;
  for (const seg of segments) cur = Array.isArray(cur) ? cur[Number(seg)] : isJsonObject(cur) ? cur[seg] : undefined;
  return isJsonObject(cur) ? cur : undefined;
}

/** kube-openapi keeps the errors of the branch that matched best; fewest errors stands in for that. */
function bestBranch(group: CombinatorGroup): ErrorObject[] {
  let best: ErrorObject[] = [];
  for (const errors of group.branches.values()) if (!best.length || errors.length < best.length) best = errors;
  return best;
}

function groupCauses(group: CombinatorGroup, mapper: ErrorMapper, data: unknown, compiled: Compiled): Located[] {
  const path = openapiPath(data, group.node);
  const mapBranch = (errors: ErrorObject[]): Located[] =>
    errors.map((e) => mapper.leaf(e)).filter((l): l is Located => l !== null)
      .map((l) => ({ ...l, node: group.node, rank: RANK.combinator }));
  const summary = (keyword: string, detail = ''): Located =>
    ({ cause: mapper.combinatorCause(keyword, path, detail), node: group.node, rank: RANK.combinator });
  switch (group.keyword) {
    case 'anyOf':
      return group.summary ? [summary('anyOf'), ...mapBranch(bestBranch(group))] : [];
    case 'oneOf': {
      if (!group.summary) return [];
      const passing = (group.summary.params as Record<string, unknown>).passingSchemas;
      if (Array.isArray(passing)) return [summary('oneOf', `Found ${passing.length} valid alternatives`)];
      return [summary('oneOf', 'Found none valid'), ...mapBranch(bestBranch(group))];
    }
    case 'allOf': {
      const holder = resolveAjvNode(compiled.root, group.schemaSegments);
      const total = Array.isArray(holder?.allOf) ? holder.allOf.length : 0;
      const failed = group.branches.size;
      const all = [...group.branches.keys()].sort((a, b) => a - b).flatMap((i) => group.branches.get(i) ?? []);
      return [...mapBranch(all), summary('allOf', failed === total ? '. None validated' : '')];
    }
    default:
      return group.summary ? [summary('not')] : [];
  }
}

function sortKey(data: unknown, located: Located): number[] {
  const key: number[] = [];
  let cur: unknown = data;
  for (const seg of located.node) {
    if (Array.isArray(cur)) {
      key.push(RANK.arrayChildren, Number(seg));
      cur = cur[Number(seg)];
    } else {
      key.push(RANK.objectChildren, isJsonObject(cur) ? Object.keys(cur).indexOf(seg) : 0);
      cur = isJsonObject(cur) ? cur[seg] : undefined;
    }
  }
  key.push(located.rank);
  return key;
}

function compareKeys(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

/** kube-openapi stops validating an object whose property count is out of bounds. */
function dropBelowPropertyCountErrors(located: Located[]): Located[] {
  const stopped = new Set(located.filter((l) => l.rank === RANK.propertyCount).map((l) => l.node.join('\0')));
  if (!stopped.size) return located;
  return located.filter((l) => {
    for (let depth = 0; depth <= l.node.length; depth++) {
      if (!stopped.has(l.node.slice(0, depth).join('\0'))) continue;
      // Below the object, or its own property/required checks, never ran.
      if (depth < l.node.length || l.rank > RANK.propertyCount) return false;
    }
    return true;
  });
}

function schemaCauses(value: unknown, schema: JSONSchemaProps, base: string | null): StatusCause[] {
  const compiled = compile(schema);
  if (compiled.run(value)) return [];
  const mapper = new ErrorMapper(value, compiled, base);
  const located: Located[] = [];
  const groups = new Map<string, CombinatorGroup>();
  for (const e of compiled.run.errors ?? []) {
    const comb = outerCombinator(e.schemaPath);
    if (!comb) {
      const l = mapper.leaf(e);
      if (l) located.push(l);
      continue;
    }
    const node = pointerSegments(e.instancePath).slice(0, comb.depth);
    const id = `${comb.segments.join('/')}/${comb.keyword}|${node.join('/')}`;
    let group = groups.get(id);
    if (!group) {
      group = { keyword: comb.keyword, schemaSegments: comb.segments, node, branches: new Map() };
      groups.set(id, group);
    }
    if (comb.summary) group.summary = e;
    else group.branches.set(comb.branch, [...(group.branches.get(comb.branch) ?? []), e]);
  }
  for (const group of groups.values()) located.push(...groupCauses(group, mapper, value, compiled));
  const keyed = dropBelowPropertyCountErrors(located).map((l) => ({ l, key: sortKey(value, l) }));
  keyed.sort((a, b) => compareKeys(a.key, b.key));
  return keyed.map(({ l }) => l.cause);
}

// ---------------------------------------------------------------------------
// Embedded resources and list types.

const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** validation.IsDNS1035Label messages. */
export function dns1035LabelErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push('must be no more than 63 characters');
  if (!DNS1035_LABEL.test(value)) {
    errs.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
  }
  return errs;
}

function governing(s: JSONSchemaProps, key: string): { schema: JSONSchemaProps | null; viaAdditional: boolean } | undefined {
  if (s.properties && Object.hasOwn(s.properties, key)) return { schema: s.properties[key] ?? null, viaAdditional: false };
  if (s.additionalProperties === undefined) return undefined;
  return { schema: isJsonObject(s.additionalProperties) ? s.additionalProperties : null, viaAdditional: true };
}

function embeddedResourceCauses(path: string | null, x: JsonObject): StatusCause[] {
  const errs: StatusCause[] = [];
  if (!Object.hasOwn(x, 'apiVersion')) errs.push(fieldErrors.required(childPath(path, 'apiVersion')));
  if (!Object.hasOwn(x, 'kind')) errs.push(fieldErrors.required(childPath(path, 'kind')));
  for (const [k, v] of Object.entries(x)) {
    if (k === 'apiVersion') {
      const p = childPath(path, k);
      if (typeof v !== 'string') errs.push(fieldErrors.invalid(p, v, 'must be a string'));
      else if (!v) errs.push(fieldErrors.required(p));
      else if (v.split('/').length > 2) errs.push(fieldErrors.invalid(p, v, `unexpected GroupVersion string: ${v}`));
    } else if (k === 'kind') {
      const p = childPath(path, k);
      if (typeof v !== 'string') errs.push(fieldErrors.invalid(p, v, 'must be a string'));
      else if (!v) errs.push(fieldErrors.required(p));
      else {
        const msgs = dns1035LabelErrors(v.toLowerCase());
        if (msgs.length) errs.push(fieldErrors.invalid(p, v, `may have mixed case, but should otherwise match: ${msgs.join(',')}`));
      }
    }
  }
  return errs;
}

/** schemaobjectmeta.Validate: apiVersion and kind of x-kubernetes-embedded-resource objects. */
function embeddedCauses(x: unknown, s: JSONSchemaProps | null, path: string | null): StatusCause[] {
  if (!s) return [];
  if (Array.isArray(x)) return x.flatMap((v, i) => embeddedCauses(v, s.items ?? null, indexPath(path, i)));
  if (!isJsonObject(x)) return [];
  const errs = s['x-kubernetes-embedded-resource'] ? embeddedResourceCauses(path, x) : [];
  for (const [k, v] of Object.entries(x)) {
    const sub = governing(s, k);
    if (sub) errs.push(...embeddedCauses(v, sub.schema, sub.viaAdditional ? indexPath(path, k) : childPath(path, k)));
  }
  return errs;
}

/** Indices of the second occurrence of each repeated value (listtype.validateListSet). */
function repeatedIndices(values: unknown[]): number[] {
  const seen = new Map<string, number>();
  const repeated: number[] = [];
  values.forEach((v, i) => {
    const id = goJSON(v === undefined ? { '\0unspecified': true } : v);
    const times = seen.get(id) ?? 0;
    seen.set(id, times + 1);
    if (times === 1) repeated.push(i);
  });
  return repeated;
}

function listMapCauses(path: string | null, s: JSONSchemaProps, list: unknown[]): StatusCause[] {
  const bad = list.findIndex((x) => x !== null && !isJsonObject(x));
  if (bad >= 0) return [fieldErrors.invalid(indexPath(path, bad), list[bad], 'must be an object for an array of list-type map')];
  const keyFields = s['x-kubernetes-list-map-keys'] ?? [];
  if (keyFields.length === 1) {
    const keyField = keyFields[0] ?? '';
    const keys = list.map((x) => (isJsonObject(x) && Object.hasOwn(x, keyField) ? x[keyField] : undefined));
    return repeatedIndices(keys).map((i) =>
      fieldErrors.duplicate(indexPath(path, i), keys[i] === undefined ? {} : { [keyField]: keys[i] }));
  }
  const keys = list.map((x) => Object.fromEntries(keyFields.filter((k) => isJsonObject(x) && Object.hasOwn(x, k))
    .map((k) => [k, (x as JsonObject)[k]])));
  return repeatedIndices(keys).map((i) => fieldErrors.duplicate(indexPath(path, i), keys[i]));
}

/** listtype.ValidateListSetsAndMaps: uniqueness in x-kubernetes-list-type set and map lists. */
function listTypeCauses(x: unknown, s: JSONSchemaProps | null, path: string | null): StatusCause[] {
  if (!s) return [];
  if (Array.isArray(x)) {
    const errs: StatusCause[] = [];
    if (s['x-kubernetes-list-type'] === 'set') {
      errs.push(...repeatedIndices(x).map((i) => fieldErrors.duplicate(indexPath(path, i), x[i])));
    } else if (s['x-kubernetes-list-type'] === 'map') {
      errs.push(...listMapCauses(path, s, x));
    }
    if (s.items) x.forEach((v, i) => errs.push(...listTypeCauses(v, s.items ?? null, indexPath(path, i))));
    return errs;
  }
  if (!isJsonObject(x)) return [];
  return Object.entries(x).flatMap(([k, v]) => {
    const sub = governing(s, k);
    if (!sub || (sub.viaAdditional && !sub.schema)) return [];
    return listTypeCauses(v, sub.schema, sub.viaAdditional ? indexPath(path, k) : childPath(path, k));
  });
}

// ---------------------------------------------------------------------------

/**
 * Validates a value against a schema node the way ValidateCustomResource does
 * with the given field path prefix (null for a whole custom resource). Used
 * for CRD default values, whose errors are rooted at "...default".
 */
export function validateValue(value: unknown, schema: JSONSchemaProps, base: string | null): StatusCause[] {
  return schemaCauses(value, schema, base);
}

/** Validate against the structural schema; returns causes with field paths and messages as kube-apiserver 1.32 words them. */
export function validate(obj: unknown, schema: JSONSchemaProps): StatusCause[] {
  return [
    ...schemaCauses(obj, schema, null),
    ...embeddedCauses(obj, schema, null),
    ...(isJsonObject(obj) ? listTypeCauses(obj, schema, null) : []),
  ];
}
