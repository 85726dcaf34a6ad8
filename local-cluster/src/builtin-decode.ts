// Decoding of built-in kinds as kube-apiserver decodes a JSON body into its
// Go struct (sigs.k8s.io/json, case-sensitive, strict): a value of the wrong
// JSON type is a 400 with encoding/json's UnmarshalTypeError text, and
// fields the struct does not have are unknown fields, refused (Strict, 400),
// warned about (Warn) or dropped (Ignore) by fieldValidation. The structs are
// described by Kubernetes v1.32's own OpenAPI definitions
// (openapi/k8s-v1.32-definitions.json, extracted by extract-k8s-definitions.ts).
//
// Owns only this decode step; names, metadata and per-kind rules stay with
// apiserver.ts and strategies.ts. Kinds without a vendored definition are not
// checked here.
import { readFileSync } from 'node:fs';
import { badRequest } from './errors.js';
import type { Schema } from './openapi/json.js';
import type { KubeObject, ResourceType } from './types.js';

const REF_PREFIX = '#/components/schemas/';
const INT_OR_STRING = 'io.k8s.apimachinery.pkg.util.intstr.IntOrString';
const QUANTITY = 'io.k8s.apimachinery.pkg.api.resource.Quantity';
// Types with their own UnmarshalJSON, or free-form: only their JSON type is not checked here.
const OPAQUE = new Set([
  'io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1', 'io.k8s.apimachinery.pkg.runtime.RawExtension',
  'io.k8s.apimachinery.pkg.apis.meta.v1.Time', 'io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime',
]);

// Read when the module loads (a cluster's start), not on the first write.
const definitions = (JSON.parse(readFileSync(new URL('./openapi/k8s-v1.32-definitions.json', import.meta.url), 'utf8')) as { schemas: Record<string, Schema> }).schemas;
// "group/version/Kind" → definition name, from each definition's x-kubernetes-group-version-kind tag.
const byGvk = new Map<string, string>();
for (const [name, schema] of Object.entries(definitions)) {
  for (const t of (schema['x-kubernetes-group-version-kind'] as Array<Record<string, string>> | undefined) ?? []) {
    byGvk.set(`${t.group}/${t.version}/${t.kind}`, name);
  }
}

/** The vendored v1.32 definitions. */
export function k8sDefinitions(): Record<string, Schema> {
  return definitions;
}

/** The definition name of a built-in kind. */
export function definitionOf(rt: Pick<ResourceType, 'group' | 'version' | 'kind'>): string | undefined {
  return byGvk.get(`${rt.group}/${rt.version}/${rt.kind}`);
}

export interface DecodeResult {
  /** The decode error: encoding/json's first UnmarshalTypeError ("json: cannot unmarshal ..."), or a type's own. */
  typeError?: string;
  /** Unknown field paths as the strict decoder reports them ("spec.template.spec.containers[0].foo"). */
  unknown: string[];
}

interface Ctx {
  defs: Record<string, Schema>;
  result: DecodeResult;
  /** An error of a type's own UnmarshalJSON: decoding stops there and it wins over saved type errors. */
  fatal?: string;
}

// resource.ParseQuantity's ErrFormatWrong, which Quantity.UnmarshalJSON returns as it is.
const QUANTITY_FORMAT = /^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$/;
const QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

function jsonKind(value: unknown): string {
  if (typeof value === 'string') return 'string';
  if (typeof value === 'number') return 'number';
  if (typeof value === 'boolean') return 'bool';
  if (Array.isArray(value)) return 'array';
  return 'object';
}

/** The definition a property schema points to (plain $ref or builder3's allOf wrapper). */
function refName(schema: Schema): string | undefined {
  const ref = (schema.$ref as string | undefined) ?? ((schema.allOf as Schema[] | undefined)?.[0]?.$ref as string | undefined);
  return ref?.startsWith(REF_PREFIX) ? ref.slice(REF_PREFIX.length) : undefined;
}

/** Go's reflect.Type.String() of the field: v1.DeploymentSpec, []v1.Container, map[string]string, int32. */
function goType(schema: Schema, defs: Record<string, Schema>): string {
  const name = refName(schema);
  if (name) {
    const parts = name.split('.');
    return `${parts[parts.length - 2]}.${parts[parts.length - 1]}`;
  }
  switch (schema.type) {
    case 'integer': return schema.format === 'int32' ? 'int32' : schema.format === 'int64' ? 'int64' : 'int';
    case 'number': return 'float64';
    case 'boolean': return 'bool';
    case 'string': return schema.format === 'byte' ? '[]uint8' : 'string';
    case 'array': return `[]${goType(schema.items as Schema, defs)}`;
    case 'object': return `map[string]${schema.additionalProperties ? goType(schema.additionalProperties as Schema, defs) : 'interface {}'}`;
    default: return 'interface {}';
  }
}

/**
 * Walk a value against its schema. `goPath` is the dotted JSON-name path Go
 * names in a type error (no indices), `strictPath` the path of unknown fields
 * (with indices), `struct` the Go struct type that holds the current field.
 */
function walk(ctx: Ctx, value: unknown, schema: Schema, goPath: string, strictPath: string, struct: string): void {
  if (value === null || value === undefined || ctx.fatal) return;
  const name = refName(schema);
  const typeError = (detail = jsonKind(value)) => {
    ctx.result.typeError ??= `json: cannot unmarshal ${detail} into Go struct field ${struct}.${goPath} of type ${goType(schema, ctx.defs)}`;
  };
  if (name) {
    if (OPAQUE.has(name)) return;
    if (name === INT_OR_STRING) {
      // intstr.UnmarshalJSON: a non-string goes through json.Unmarshal into its int32, and that
      // UnmarshalTypeError gets the field's context on its way up (decode.go addErrorContext).
      if (typeof value !== 'string' && !(Number.isInteger(value) && Math.abs(value as number) <= 2147483647)) {
        const detail = typeof value === 'number' ? `number ${value}` : jsonKind(value);
        ctx.fatal = `json: cannot unmarshal ${detail} into Go struct field ${struct}.${goPath} of type int32`;
      }
      return;
    }
    if (name === QUANTITY) {
      // Quantity.UnmarshalJSON: ParseQuantity of the string, or of the JSON text of anything else.
      const text = typeof value === 'string' ? value.trim() : typeof value === 'number' ? String(value) : JSON.stringify(value);
      if (!QUANTITY_FORMAT.test(text)) ctx.fatal = QUANTITY_ERROR;
      return;
    }
    const def = ctx.defs[name];
    if (!def) return;
    return walkStruct(ctx, value, def, goPath, strictPath, name.slice(name.lastIndexOf('.') + 1), typeError);
  }
  switch (schema.type) {
    case 'string':
      if (schema.format !== 'byte' && typeof value !== 'string') typeError();
      return;
    case 'boolean':
      if (typeof value !== 'boolean') typeError();
      return;
    case 'number':
      if (typeof value !== 'number') typeError();
      return;
    case 'integer':
      if (typeof value !== 'number') return typeError();
      if (!Number.isInteger(value) || (schema.format === 'int32' && (value > 2147483647 || value < -2147483648))) typeError(`number ${value}`);
      return;
    case 'array':
      if (!Array.isArray(value)) return typeError();
      value.forEach((item, i) => walk(ctx, item, schema.items as Schema, goPath, `${strictPath}[${i}]`, struct));
      return;
    case 'object':
      if (jsonKind(value) !== 'object') return typeError();
      if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
        for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
          walk(ctx, item, schema.additionalProperties as Schema, goPath, `${strictPath}.${key}`, struct);
        }
      }
      return;
    default:
      return;
  }
}

function walkStruct(ctx: Ctx, value: unknown, def: Schema, goPath: string, strictPath: string, struct: string, typeError: () => void): void {
  if (jsonKind(value) !== 'object') return typeError();
  const props = (def.properties ?? {}) as Record<string, Schema>;
  // kubectl sends keys sorted (it re-encodes a map); the strict decoder reports them in that order.
  for (const key of Object.keys(value as object).sort()) {
    if (ctx.fatal) return;
    const item = (value as Record<string, unknown>)[key];
    const childGo = goPath ? `${goPath}.${key}` : key;
    const childStrict = strictPath ? `${strictPath}.${key}` : key;
    const prop = props[key];
    if (!prop) {
      ctx.result.unknown.push(childStrict);
      continue;
    }
    walk(ctx, item, prop, childGo, childStrict, struct);
  }
}

/** Decode `obj` as the Go struct of its kind; undefined when no definition is vendored for it. */
export function decodeBuiltin(rt: Pick<ResourceType, 'group' | 'version' | 'kind'>, obj: KubeObject): DecodeResult | undefined {
  const name = definitionOf(rt);
  if (!name) return undefined;
  const defs = k8sDefinitions();
  const ctx: Ctx = { defs, result: { unknown: [] } };
  walkStruct(ctx, obj, defs[name]!, '', '', rt.kind, () => {});
  if (ctx.fatal) ctx.result.typeError = ctx.fatal;
  return ctx.result;
}

/**
 * The apiserver's answer to a decoded body: a type error is a 400; unknown
 * fields are a 400 under Strict, warnings under Warn (the server's default),
 * dropped under Ignore. Unknown fields are removed from `obj` in every mode.
 */
export function enforceBuiltinDecode(
  rt: ResourceType, obj: KubeObject, opts: { fieldValidation?: string; warnings?: string[] },
): void {
  const result = decodeBuiltin(rt, obj);
  if (!result) return;
  const prefix = `${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}`;
  if (result.typeError) throw badRequest(`${prefix}: ${result.typeError}`);
  if (!result.unknown.length) return;
  const mode = opts.fieldValidation ?? 'Warn';
  if (mode === 'Strict') {
    throw badRequest(`${prefix}: strict decoding error: ${result.unknown.map((f) => `unknown field "${f}"`).join(', ')}`);
  }
  if (mode === 'Warn') opts.warnings?.push(...result.unknown.map((f) => `unknown field "${f}"`));
  for (const path of result.unknown) dropPath(obj, path);
}

/** Remove the field at a strict-decoder path ("a.b[0].c"), as decoding into the struct would. */
function dropPath(obj: unknown, path: string): void {
  const steps = path.split(/\.|(?=\[)/).map((s) => (s.startsWith('[') ? Number(s.slice(1, -1)) : s));
  let cur: unknown = obj;
  for (const step of steps.slice(0, -1)) {
    if (!cur || typeof cur !== 'object') return;
    cur = (cur as Record<string | number, unknown>)[step];
  }
  if (cur && typeof cur === 'object') delete (cur as Record<string | number, unknown>)[steps[steps.length - 1]!];
}
