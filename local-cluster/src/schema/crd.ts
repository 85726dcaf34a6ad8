// CustomResourceDefinition (apiextensions.k8s.io/v1) defaulting, validation,
// status and the resource types a CRD serves.
//
// Validation follows apiextensions-apiserver pkg/apis/apiextensions/validation
// and pkg/apiserver/schema/validation.go. The apiserver validates the
// *internal* version, into which v1 converts by hoisting per-version schema,
// subresources and printer columns to the top level when all versions agree
// (always, for a single version). That is why field paths read
// "spec.validation.openAPIV3Schema..." and "spec.additionalPrinterColumns[0]..."
// for most CRDs, and "spec.versions[i].schema.openAPIV3Schema..." otherwise.

import { deepCopy } from '../object-meta.js';
import type { JSONSchemaProps, KubeObject, PrinterColumn, ResourceType, StatusCause } from '../types.js';
import { celCompileErrors, ruleShapeErrors } from './cel-rules.js';
import { isJsonObject, pruneFields } from './structural.js';
import { compileGoPattern, dns1035LabelErrors, fieldErrors as fe, goQuote, goSharpV, GoLiteral, validateValue } from './validate.js';

type JsonObject = Record<string, unknown>;

const asObject = (x: unknown): JsonObject => (isJsonObject(x) ? x : {});
const asArray = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);
const asString = (x: unknown): string => (typeof x === 'string' ? x : '');
const asSchema = (x: unknown): JSONSchemaProps | undefined => (isJsonObject(x) ? x as JSONSchemaProps : undefined);

function ensureObject(parent: JsonObject, key: string): JsonObject {
  const existing = parent[key];
  if (isJsonObject(existing)) return existing;
  const created: JsonObject = {};
  parent[key] = created;
  return created;
}

function versionSchema(version: JsonObject): JSONSchemaProps | undefined {
  return asSchema(asObject(version.schema).openAPIV3Schema);
}

/** Semantic.DeepEqual: like JSON equality, but empty and missing lists/maps are equal. */
function semanticEqual(a: unknown, b: unknown): boolean {
  const empty = (x: unknown): boolean =>
    x === undefined || (Array.isArray(x) && !x.length) || (isJsonObject(x) && !Object.keys(x).length);
  if (empty(a) && empty(b)) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => semanticEqual(v, b[i]));
  if (isJsonObject(a) && isJsonObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].every((k) => semanticEqual(a[k], b[k]));
  }
  return a === b;
}

// ---------------------------------------------------------------------------
// Defaulting and status.

/**
 * Fill CRD defaults as the apiserver does (apiextensions v1 SetDefaults):
 * names.singular, names.listKind, conversion strategy None, the always
 * serialized preserveUnknownFields/served/storage. Unlike v1beta1, v1 has no
 * default scope: a missing scope is a validation error.
 */
export function defaultCrd(crd: KubeObject): void {
  const spec = ensureObject(crd, 'spec');
  const names = ensureObject(spec, 'names');
  const kind = asString(names.kind);
  if (!names.singular) names.singular = kind.toLowerCase();
  if (!names.listKind && kind) names.listKind = `${kind}List`;
  if (!isJsonObject(spec.conversion)) spec.conversion = { strategy: 'None' };
  const service = asObject(asObject(asObject(asObject(spec.conversion).webhook).clientConfig).service);
  if (Object.keys(service).length && service.port === undefined) service.port = 443;
  if (spec.preserveUnknownFields === undefined) spec.preserveUnknownFields = false;
  for (const version of asArray(spec.versions)) {
    if (!isJsonObject(version)) continue;
    if (version.served === undefined) version.served = false;
    if (version.storage === undefined) version.storage = false;
  }
}

function storageVersion(crd: KubeObject): string | undefined {
  const storage = asArray(asObject(crd.spec).versions).map(asObject).find((v) => v.storage === true);
  return storage ? asString(storage.name) : undefined;
}

function acceptedNames(names: JsonObject): JsonObject {
  const accepted: JsonObject = { plural: asString(names.plural), singular: asString(names.singular) };
  if (asArray(names.shortNames).length) accepted.shortNames = names.shortNames;
  accepted.kind = asString(names.kind);
  accepted.listKind = asString(names.listKind);
  if (asArray(names.categories).length) accepted.categories = names.categories;
  return accepted;
}

function condition(previous: unknown[], type: string, reason: string, message: string, now: string): JsonObject {
  const old = previous.map(asObject).find((c) => c.type === type && c.status === 'True');
  const since = old && typeof old.lastTransitionTime === 'string' ? old.lastTransitionTime : now;
  return { type, status: 'True', lastTransitionTime: since, reason, message };
}

/**
 * The status the apiserver's controllers settle on for an accepted CRD:
 * NamesAccepted and Established conditions (keeping the transition time of
 * conditions already true), accepted names, and stored versions including
 * the current storage version.
 */
export function crdStatus(crd: KubeObject, now: string): Record<string, unknown> {
  const status = asObject(crd.status);
  const previous = asArray(status.conditions);
  const stored = asArray(status.storedVersions).filter((v): v is string => typeof v === 'string');
  const storage = storageVersion(crd);
  const storedVersions = storage && !stored.includes(storage) ? [...stored, storage] : stored;
  return {
    conditions: [
      condition(previous, 'NamesAccepted', 'NoConflicts', 'no conflicts found', now),
      condition(previous, 'Established', 'InitialNamesAccepted', 'the initial names have been accepted', now),
    ],
    acceptedNames: acceptedNames(asObject(asObject(crd.spec).names)),
    storedVersions,
  };
}

function printerColumn(c: JsonObject): PrinterColumn {
  const column: PrinterColumn = { name: asString(c.name), type: asString(c.type), jsonPath: asString(c.jsonPath) };
  if (typeof c.format === 'string') column.format = c.format;
  if (typeof c.description === 'string') column.description = c.description;
  if (typeof c.priority === 'number') column.priority = c.priority;
  return column;
}

/** One ResourceType per served version. */
export function resourceTypesFromCrd(crd: KubeObject): ResourceType[] {
  const spec = asObject(crd.spec);
  const names = asObject(spec.names);
  const kind = asString(names.kind);
  return asArray(spec.versions).map(asObject).filter((v) => v.served === true).map((v) => {
    const type: ResourceType = {
      group: asString(spec.group),
      version: asString(v.name),
      kind,
      listKind: asString(names.listKind) || `${kind}List`,
      plural: asString(names.plural),
      singular: asString(names.singular) || kind.toLowerCase(),
      namespaced: spec.scope === 'Namespaced',
      shortNames: asArray(names.shortNames).filter((s): s is string => typeof s === 'string'),
      categories: asArray(names.categories).filter((s): s is string => typeof s === 'string'),
      statusSubresource: isJsonObject(asObject(v.subresources).status),
      builtin: false,
      printerColumns: asArray(v.additionalPrinterColumns).filter(isJsonObject).map(printerColumn),
    };
    const schema = versionSchema(v);
    if (schema) type.schema = schema;
    return type;
  });
}

// ---------------------------------------------------------------------------
// Name validation (k8s.io/apimachinery/pkg/util/validation).

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function dns1123SubdomainErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 253) errs.push('must be no more than 253 characters');
  if (!DNS1123_SUBDOMAIN.test(value)) {
    errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  }
  return errs;
}

function enumStringErrors(path: string, value: string, accepted: string[]): StatusCause[] {
  if (!value) return [fe.required(path)];
  return accepted.includes(value) ? [] : [fe.notSupported(path, value, accepted)];
}

function metadataErrors(crd: KubeObject, spec: JsonObject, names: JsonObject): StatusCause[] {
  const required = `${asString(names.plural)}.${asString(spec.group)}`;
  const nameErrors = (name: string, prefix: boolean): string[] => {
    // generateName may end in "-": maskTrailingDash turns the last two characters into "a".
    const checked = prefix && name.length > 1 && name.endsWith('-') ? `${name.slice(0, -2)}a` : name;
    const errs = dns1123SubdomainErrors(checked);
    if (name !== required) errs.push('must be spec.names.plural+"."+spec.group');
    return errs;
  };
  const meta = asObject(crd.metadata);
  const errs: StatusCause[] = [];
  const generateName = asString(meta.generateName);
  if (generateName) errs.push(...nameErrors(generateName, true).map((m) => fe.invalid('metadata.generateName', generateName, m)));
  const name = asString(meta.name);
  if (!name) errs.push(fe.required('metadata.name', 'name or generateName is required'));
  else errs.push(...nameErrors(name, false).map((m) => fe.invalid('metadata.name', name, m)));
  if (asString(meta.namespace)) errs.push(fe.forbidden('metadata.namespace', 'not allowed on this type'));
  return errs;
}

function groupErrors(group: string): StatusCause[] {
  if (!group) return [fe.required('spec.group')];
  const dns = dns1123SubdomainErrors(group);
  if (dns.length) return [fe.invalid('spec.group', group, dns.join(','))];
  if (group.split('.').length < 2) return [fe.invalid('spec.group', group, 'should be a domain with at least one dot')];
  return [];
}

function namesErrors(names: JsonObject): StatusCause[] {
  const errs: StatusCause[] = [];
  for (const key of ['plural', 'singular', 'kind', 'listKind']) {
    if (!asString(names[key])) errs.push(fe.required(`spec.names.${key}`));
  }
  const label = (key: string, mixedCase: boolean): void => {
    const value = asString(names[key]);
    const msgs = value ? dns1035LabelErrors(mixedCase ? value.toLowerCase() : value) : [];
    if (!msgs.length) return;
    const prefix = mixedCase ? 'may have mixed case, but should otherwise match: ' : '';
    errs.push(fe.invalid(`spec.names.${key}`, value, prefix + msgs.join(',')));
  };
  label('plural', false);
  label('singular', false);
  label('kind', true);
  label('listKind', true);
  const list = (key: string): void => asArray(names[key]).forEach((value, i) => {
    const msgs = dns1035LabelErrors(asString(value));
    if (msgs.length) errs.push(fe.invalid(`spec.names.${key}[${i}]`, value, msgs.join(',')));
  });
  list('shortNames');
  const kind = asString(names.kind);
  if (kind && kind === names.listKind) errs.push(fe.invalid('spec.names.listKind', kind, 'kind and listKind may not be the same'));
  list('categories');
  return errs;
}

// ---------------------------------------------------------------------------
// Printer columns.

const COLUMN_TYPES = ['boolean', 'date', 'integer', 'number', 'string'];
const COLUMN_FORMATS = ['byte', 'date', 'date-time', 'double', 'float', 'int32', 'int64', 'password'];

function columnErrors(col: JsonObject, path: string): StatusCause[] {
  const errs: StatusCause[] = [];
  if (!asString(col.name)) errs.push(fe.required(`${path}.name`));
  const type = asString(col.type);
  if (!type) errs.push(fe.required(`${path}.type`, `must be one of ${COLUMN_TYPES.join(',')}`));
  else if (!COLUMN_TYPES.includes(type)) errs.push(fe.invalid(`${path}.type`, type, `must be one of ${COLUMN_TYPES.join(',')}`));
  const format = asString(col.format);
  if (format && !COLUMN_FORMATS.includes(format)) errs.push(fe.invalid(`${path}.format`, format, `must be one of ${COLUMN_FORMATS.join(',')}`));
  // The internal field is JSONPath, and so is the reported path.
  const jsonPath = asString(col.jsonPath);
  if (!jsonPath) errs.push(fe.required(`${path}.JSONPath`));
  else if (!jsonPath.startsWith('.')) errs.push(fe.invalid(`${path}.JSONPath`, jsonPath, 'must be a simple json path starting with .'));
  return errs;
}

// ---------------------------------------------------------------------------
// Schema validation: ValidateCustomResourceDefinitionOpenAPISchema.

const OPENAPI_TYPES = ['array', 'boolean', 'integer', 'number', 'object', 'string'];
const META_FIELDS = new Set(['metadata', 'kind', 'apiVersion']);

interface SchemaContext {
  defaultsForbiddenReason?: string; // set where defaults are not allowed
  insideResourceMeta: boolean;
}

function isZero(v: unknown): boolean {
  return v === undefined || v === null || v === false || v === ''
    || (Array.isArray(v) && !v.length) || (isJsonObject(v) && !Object.keys(v).length);
}

/** specStandardValidatorV3.validate: keywords CRD schemas may not use. */
function nodeKeywordErrors(s: JSONSchemaProps, path: string, ctx: SchemaContext): StatusCause[] {
  const errs: StatusCause[] = [];
  if (s.type && !OPENAPI_TYPES.includes(s.type)) errs.push(fe.notSupported(`${path}.type`, s.type, OPENAPI_TYPES));
  if (s.default !== undefined && ctx.defaultsForbiddenReason !== undefined) {
    errs.push(fe.forbidden(`${path}.default`, `must not be set ${ctx.defaultsForbiddenReason}`.trimEnd()));
  }
  const unsupported: [string, string][] = [
    ['id', 'id is not supported'], ['additionalItems', 'additionalItems is not supported'],
    ['patternProperties', 'patternProperties is not supported'], ['definitions', 'definitions is not supported'],
    ['dependencies', 'dependencies is not supported'], ['$ref', '$ref is not supported'],
  ];
  for (const [key, detail] of unsupported) if (!isZero(s[key])) errs.push(fe.forbidden(`${path}.${key}`, detail));
  if (s.type === 'null') errs.push(fe.forbidden(`${path}.type`, 'type cannot be set to null, use nullable as an alternative'));
  if (Array.isArray(s.items)) errs.push(fe.forbidden(`${path}.items`, 'items must be a schema object and not an array'));
  if (ctx.insideResourceMeta && s['x-kubernetes-embedded-resource']) {
    errs.push(fe.forbidden(`${path}.x-kubernetes-embedded-resource`, 'must not be used inside of resource meta'));
  }
  return errs;
}

function listAndMapTypeErrors(s: JSONSchemaProps, path: string): StatusCause[] {
  const errs: StatusCause[] = [];
  const mapType = s['x-kubernetes-map-type'];
  const listType = s['x-kubernetes-list-type'];
  const mapKeys = s['x-kubernetes-list-map-keys'] ?? [];
  if (mapType !== undefined && s.type !== 'object') {
    errs.push(s.type ? fe.invalid(`${path}.type`, s.type, 'must be object if x-kubernetes-map-type is specified')
      : fe.required(`${path}.type`, 'must be object if x-kubernetes-map-type is specified'));
  }
  if (mapType !== undefined && mapType !== 'atomic' && mapType !== 'granular') {
    errs.push(fe.notSupported(`${path}.x-kubernetes-map-type`, mapType, ['atomic', 'granular']));
  }
  if (listType !== undefined && s.type !== 'array') {
    errs.push(s.type ? fe.invalid(`${path}.type`, s.type, 'must be array if x-kubernetes-list-type is specified')
      : fe.required(`${path}.type`, 'must be array if x-kubernetes-list-type is specified'));
  }
  if (listType !== undefined && !['atomic', 'set', 'map'].includes(listType)) {
    errs.push(fe.notSupported(`${path}.x-kubernetes-list-type`, listType, ['atomic', 'set', 'map']));
  }
  if (mapKeys.length && listType === undefined) {
    errs.push(fe.required(`${path}.x-kubernetes-list-type`, 'must be map if x-kubernetes-list-map-keys is non-empty'));
  } else if (mapKeys.length && listType !== 'map') {
    errs.push(fe.invalid(`${path}.x-kubernetes-list-type`, listType, 'must be map if x-kubernetes-list-map-keys is non-empty'));
  }
  if (listType === 'map') {
    if (!mapKeys.length) errs.push(fe.required(`${path}.x-kubernetes-list-map-keys`, 'must not be empty if x-kubernetes-list-type is map'));
    const items = asSchema(s.items);
    if (!items) errs.push(fe.required(`${path}.items`, 'must have a schema if x-kubernetes-list-type is map'));
    else if (items.type !== 'object') {
      errs.push(fe.invalid(`${path}.items.type`, items.type ?? '', "must be object if parent array's x-kubernetes-list-type is map"));
    } else {
      for (const key of mapKeys) {
        const prop = items.properties?.[key];
        if (!prop) errs.push(fe.invalid(`${path}.x-kubernetes-list-map-keys`, new GoLiteral(`[]string{${mapKeys.map(goQuote).join(', ')}}`), 'entries must all be names of item properties'));
        else if (prop.type === 'array' || prop.type === 'object') {
          errs.push(fe.invalid(`${path}.items.properties[${key}].type`, items.type, "must be a scalar type if parent array's x-kubernetes-list-type is map"));
        }
      }
    }
  }
  return errs;
}

function openAPISchemaErrors(s: JSONSchemaProps, path: string, ctx: SchemaContext, isRoot: boolean): StatusCause[] {
  const errs = nodeKeywordErrors(s, path, ctx);
  if (s.uniqueItems === true) {
    errs.push(fe.forbidden(`${path}.uniqueItems`, 'uniqueItems cannot be set to true since the runtime complexity becomes quadratic'));
  }
  if (s.additionalProperties !== undefined) {
    const ap = s.additionalProperties;
    if (Object.keys(s.properties ?? {}).length && (ap === false || isJsonObject(ap))) {
      errs.push(fe.forbidden(`${path}.additionalProperties`, 'additionalProperties and properties are mutual exclusive'));
    }
    const sub = ctx.insideResourceMeta ? { ...ctx, defaultsForbiddenReason: 'inside additionalProperties applying to object metadata' } : ctx;
    const apSchema = asSchema(ap);
    if (apSchema) errs.push(...openAPISchemaErrors(apSchema, `${path}.additionalProperties`, sub, false));
  }
  for (const [key, prop] of Object.entries(s.properties ?? {})) {
    let sub = ctx;
    if ((isRoot || s['x-kubernetes-embedded-resource']) && META_FIELDS.has(key)) {
      sub = { ...sub, insideResourceMeta: true };
      if (isRoot) sub.defaultsForbiddenReason = `in top-level ${key}`;
    }
    errs.push(...openAPISchemaErrors(prop, `${path}.properties[${key}]`, sub, false));
  }
  if (s.not) errs.push(...openAPISchemaErrors(s.not, `${path}.not`, ctx, false));
  for (const k of ['allOf', 'oneOf', 'anyOf'] as const) {
    asArray(s[k]).forEach((b, i) => {
      const branch = asSchema(b);
      if (branch) errs.push(...openAPISchemaErrors(branch, `${path}.${k}[${i}]`, ctx, false));
    });
  }
  const items = asSchema(s.items);
  if (items) errs.push(...openAPISchemaErrors(items, `${path}.items`, ctx, false));
  if (s['x-kubernetes-preserve-unknown-fields'] === false) {
    errs.push(fe.invalid(`${path}.x-kubernetes-preserve-unknown-fields`, false, 'must be true or undefined'));
  }
  errs.push(...listAndMapTypeErrors(s, path));
  errs.push(...ruleShapeErrors(s, path));
  return errs;
}

// ---------------------------------------------------------------------------
// Structural schema: ValidateStructural (pkg/apiserver/schema/validation.go).

type Level = 'root' | 'item' | 'field';

const EMPTY_TYPE_DETAIL: Record<Level, string> = {
  root: 'must not be empty at the root',
  item: 'must not be empty for specified array items',
  field: 'must not be empty for specified object fields',
};

function isIntOrStringAnyOf(anyOf: unknown): boolean {
  const branches = asArray(anyOf).map(asObject);
  return branches.length === 2
    && branches.every((b, i) => Object.keys(b).length === 1 && b.type === (i === 0 ? 'integer' : 'string'));
}

function patternErrors(s: JSONSchemaProps, path: string): StatusCause[] {
  if (!s.pattern) return [];
  const compiled = compileGoPattern(s.pattern);
  if (compiled instanceof RegExp) return [];
  return [fe.invalid(`${path}.pattern`, s.pattern, `must be a valid regular expression, but isn't: error parsing regexp: ${compiled.message}`)];
}

/** validateValueValidation: the junctors of a node and its pattern. */
function valueValidationErrors(s: JSONSchemaProps, skipAnyOf: boolean, skipFirstAllOfAnyOf: boolean, path: string): StatusCause[] {
  const errs: StatusCause[] = [];
  if (!skipAnyOf) asArray(s.anyOf).forEach((b, i) => errs.push(...nestedValueValidationErrors(asObject(b), false, `${path}.anyOf[${i}]`)));
  asArray(s.allOf).forEach((b, i) => errs.push(...nestedValueValidationErrors(asObject(b), skipFirstAllOfAnyOf && i === 0, `${path}.allOf[${i}]`)));
  asArray(s.oneOf).forEach((b, i) => errs.push(...nestedValueValidationErrors(asObject(b), false, `${path}.oneOf[${i}]`)));
  if (s.not) errs.push(...nestedValueValidationErrors(s.not, false, `${path}.not`));
  errs.push(...patternErrors(s, path));
  return errs;
}

const NESTED_FORBIDDEN: [string, string][] = [
  ['default', 'must be undefined to be structural'],
  ['title', 'must be empty to be structural'],
  ['description', 'must be empty to be structural'],
  ['nullable', 'must be false to be structural'],
  ['externalDocs', 'must be undefined to be structural'],
  ['x-kubernetes-preserve-unknown-fields', 'must be false to be structural'],
  ['x-kubernetes-embedded-resource', 'must be false to be structural'],
  ['x-kubernetes-int-or-string', 'must be false to be structural'],
  ['x-kubernetes-list-map-keys', 'must be empty to be structural'],
  ['x-kubernetes-list-type', 'must be undefined to be structural'],
  ['x-kubernetes-map-type', 'must be undefined to be structural'],
  ['x-kubernetes-validations', 'must be empty to be structural'],
];

/** Inside allOf/anyOf/oneOf/not only value validations may appear. */
function nestedValueValidationErrors(v: JSONSchemaProps, skipAnyOf: boolean, path: string): StatusCause[] {
  const errs = valueValidationErrors(v, skipAnyOf, false, path);
  const items = asSchema(v.items);
  if (items) errs.push(...nestedValueValidationErrors(items, false, `${path}.items`));
  for (const [key, prop] of Object.entries(v.properties ?? {})) {
    errs.push(...nestedValueValidationErrors(prop, false, `${path}.properties[${key}]`));
  }
  if (v.type) errs.push(fe.forbidden(`${path}.type`, 'must be empty to be structural'));
  if (v.additionalProperties !== undefined) errs.push(fe.forbidden(`${path}.additionalProperties`, 'must be undefined to be structural'));
  for (const [key, detail] of NESTED_FORBIDDEN) {
    if (key === 'default' ? v.default !== undefined && v.default !== null : !isZero(v[key])) errs.push(fe.forbidden(`${path}.${key}`, detail));
  }
  if (v.properties && Object.hasOwn(v.properties, 'metadata')) {
    errs.push(fe.forbidden(`${path}.properties[metadata]`, 'must not be specified in a nested context'));
  }
  return errs;
}

function metadataInvariantErrors(m: JSONSchemaProps, checkMetadata: boolean, lvl: Level, path: string): StatusCause[] {
  const errs: StatusCause[] = [];
  if (checkMetadata && m.type !== 'object') errs.push(fe.invalid(`${path}.type`, m.type ?? '', 'must be object'));
  if (lvl !== 'root') return errs;
  // Only name and generateName may be restricted; metadata is implicitly specified.
  const props = Object.keys(m.properties ?? {});
  const onlyNames = props.every((p) => p === 'name' || p === 'generateName');
  const extra = Object.keys(m).filter((k) => k !== 'type' && k !== 'default' && !(k === 'properties' && onlyNames) && !isZero(m[k]));
  if (extra.length) errs.push(fe.forbidden(path, 'must not specify anything other than name and generateName, but metadata is implicitly specified'));
  return errs;
}

function structuralInvariantErrors(s: JSONSchemaProps, lvl: Level, path: string): StatusCause[] {
  const errs: StatusCause[] = [];
  const items = asSchema(s.items);
  if (s.type === 'array' && !items) errs.push(fe.required(`${path}.items`, 'must be specified'));
  if (items) errs.push(...structuralInvariantErrors(items, 'item', `${path}.items`));
  for (const [key, prop] of Object.entries(s.properties ?? {})) {
    errs.push(...structuralInvariantErrors(prop, 'field', `${path}.properties[${key}]`));
  }
  if (s.additionalProperties !== undefined) {
    if (lvl === 'root') errs.push(fe.forbidden(`${path}.additionalProperties`, 'must not be used at the root'));
    const ap = asSchema(s.additionalProperties);
    if (ap) errs.push(...structuralInvariantErrors(ap, 'field', `${path}.additionalProperties`));
  }
  const intOrString = s['x-kubernetes-int-or-string'] === true;
  const preserve = s['x-kubernetes-preserve-unknown-fields'] === true;
  const embedded = s['x-kubernetes-embedded-resource'] === true;
  if (intOrString && preserve) errs.push(fe.invalid(`${path}.x-kubernetes-preserve-unknown-fields`, true, 'must be false if x-kubernetes-int-or-string is true'));
  if (intOrString && embedded) errs.push(fe.invalid(`${path}.x-kubernetes-embedded-resource`, true, 'must be false if x-kubernetes-int-or-string is true'));
  const firstAllOf = asObject(asArray(s.allOf)[0]);
  errs.push(...valueValidationErrors(s, isIntOrStringAnyOf(s.anyOf), isIntOrStringAnyOf(firstAllOf.anyOf), path));
  if (embedded && s.type !== 'object') {
    const detail = 'must be object if x-kubernetes-embedded-resource is true';
    errs.push(s.type ? fe.invalid(`${path}.type`, s.type, detail) : fe.required(`${path}.type`, detail));
  } else if (!s.type && !intOrString && !preserve) {
    errs.push(fe.required(`${path}.type`, EMPTY_TYPE_DETAIL[lvl]));
  }
  if (embedded && s.additionalProperties !== undefined) {
    errs.push(fe.forbidden(`${path}.additionalProperties`, 'must not be used if x-kubernetes-embedded-resource is set'));
  }
  if (lvl === 'root' && s.type && s.type !== 'object') errs.push(fe.invalid(`${path}.type`, s.type, 'must be object at the root'));
  const checkMetadata = lvl === 'root' || embedded;
  for (const key of ['kind', 'apiVersion']) {
    const prop = s.properties?.[key];
    if (prop && checkMetadata && prop.type !== 'string') errs.push(fe.invalid(`${path}.properties[${key}].type`, prop.type ?? '', 'must be string'));
  }
  const metadata = s.properties?.metadata;
  if (metadata) errs.push(...metadataInvariantErrors(metadata, checkMetadata, lvl, `${path}.properties[metadata]`));
  if (embedded && !preserve && !Object.keys(s.properties ?? {}).length) {
    errs.push(fe.required(`${path}.properties`, 'must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields'));
  }
  return errs;
}

/** validateStructuralCompleteness: fields named in the root's junctors must exist in the structure. */
function completenessErrors(v: JSONSchemaProps, s: JSONSchemaProps | undefined, sPath: string, vPath: string): StatusCause[] {
  if (!s) return [fe.required(sPath, `because it is defined in ${vPath}`)];
  const errs: StatusCause[] = [];
  if (v.not) errs.push(...nestedCompletenessErrors(v.not, s, sPath, `${vPath}.not`));
  for (const k of ['allOf', 'anyOf', 'oneOf'] as const) {
    asArray(v[k]).forEach((b, i) => errs.push(...nestedCompletenessErrors(asObject(b), s, sPath, `${vPath}.${k}[${i}]`)));
  }
  return errs;
}

function nestedCompletenessErrors(v: JSONSchemaProps, s: JSONSchemaProps | undefined, sPath: string, vPath: string): StatusCause[] {
  if (!s) return [fe.required(sPath, `because it is defined in ${vPath}`)];
  const errs = completenessErrors(v, s, sPath, vPath);
  const items = asSchema(v.items);
  if (items) errs.push(...nestedCompletenessErrors(items, asSchema(s.items), `${sPath}.items`, `${vPath}.items`));
  for (const [key, prop] of Object.entries(v.properties ?? {})) {
    const structural = s.properties?.[key];
    if (!structural) {
      errs.push(fe.required(`${sPath}.properties[${key}]`, `because it is defined in ${vPath}.properties[${key}]`));
    } else {
      errs.push(...nestedCompletenessErrors(prop, structural, `${sPath}.properties[${key}]`, `${vPath}.properties[${key}]`));
    }
  }
  return errs;
}

function structuralErrors(schema: JSONSchemaProps, path: string): StatusCause[] {
  const errs = [...structuralInvariantErrors(schema, 'root', path), ...completenessErrors(schema, schema, path, path)];
  // The apiserver sorts these by their Error() text to make map order irrelevant.
  const text = (e: StatusCause): string => `${e.field}: ${e.message}`;
  return errs.sort((a, b) => (text(a) < text(b) ? -1 : text(a) > text(b) ? 1 : 0));
}

/** defaulting.ValidateDefaults: defaults must be pruned and valid against their own schema. */
function defaultErrors(s: JSONSchemaProps, path: string, insideMeta: boolean, embedded: boolean): StatusCause[] {
  const errs: StatusCause[] = [];
  const isEmbedded = embedded || s['x-kubernetes-embedded-resource'] === true;
  const meta = isEmbedded ? false : insideMeta;
  if (s.default !== undefined && s.default !== null && !meta) {
    const pruned = deepCopy(s.default);
    pruneFields(pruned, s, isEmbedded);
    if (JSON.stringify(pruned) !== JSON.stringify(s.default)) {
      errs.push(fe.invalid(`${path}.default`, s.default, 'must not have unknown fields'));
    }
    errs.push(...validateValue(s.default, s, `${path}.default`));
  }
  const items = asSchema(s.items);
  if (items) errs.push(...defaultErrors(items, `${path}.items`, meta, false));
  for (const [key, prop] of Object.entries(s.properties ?? {})) {
    errs.push(...defaultErrors(prop, `${path}.properties[${key}]`, meta || (isEmbedded && META_FIELDS.has(key)), false));
  }
  return errs;
}

const ROOT_FIELDS_WITH_STATUS = [
  'description', 'type', 'format', 'title', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum',
  'maxLength', 'minLength', 'pattern', 'maxItems', 'minItems', 'uniqueItems', 'multipleOf', 'required',
  'items', 'properties', 'externalDocs', 'example', 'x-kubernetes-preserve-unknown-fields', 'x-kubernetes-validations',
];
const ROOT_FIELDS_WITH_STATUS_GO = '[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]';

/** With a status subresource, status validation is cut out of properties[status]; the root must allow that. */
function statusRootErrors(schema: JSONSchemaProps, base: string): StatusCause[] {
  if (schema.type !== undefined && schema.type !== 'object') {
    return [fe.invalid(`${base}.openAPIV3Schema.type`, schema.type, 'only "object" is allowed as the type at the root of the schema if the status subresource is enabled')];
  }
  const disallowed = Object.keys(schema).filter((k) => !ROOT_FIELDS_WITH_STATUS.includes(k) && !isZero(schema[k]));
  if (!disallowed.length) return [];
  return [fe.invalid(`${base}.openAPIV3Schema`, new GoLiteral(`apiextensions.JSONSchemaProps${goSharpV(schema).replace(/^map\[string\]interface \{\}/, '')}`),
    `only ${ROOT_FIELDS_WITH_STATUS_GO} fields are allowed at the root of the schema if the status subresource is enabled`)];
}

/** validateCustomResourceDefinitionValidation for the schema found at `${base}.openAPIV3Schema`. */
function schemaErrors(schema: JSONSchemaProps, base: string, statusEnabled: boolean): StatusCause[] {
  const root = `${base}.openAPIV3Schema`;
  const errs = statusEnabled ? statusRootErrors(schema, base) : [];
  if (schema.nullable) errs.push(fe.forbidden(`${root}.nullable`, 'nullable cannot be true at the root'));
  errs.push(...openAPISchemaErrors(schema, root, { insideResourceMeta: false }, true));
  const structural = structuralErrors(schema, root);
  errs.push(...structural);
  if (!structural.length) errs.push(...defaultErrors(schema, root, false, true));
  // Rules are compiled only against a schema that is otherwise valid, as the apiserver does.
  if (!errs.length) errs.push(...celCompileErrors(schema, root));
  return errs;
}

function hasDefaults(s: unknown): boolean {
  if (!isJsonObject(s)) return Array.isArray(s) && s.some(hasDefaults);
  if (s.default !== undefined) return true;
  return ['items', 'not', 'additionalProperties', 'allOf', 'anyOf', 'oneOf'].some((k) => hasDefaults(s[k]))
    || Object.values(asObject(s.properties)).some(hasDefaults);
}

// ---------------------------------------------------------------------------
// The whole CRD.

/** Go's %#v of the internal version list, for "spec.versions: Invalid value: ..." messages. */
function versionsLiteral(versions: JsonObject[], hoisted: { schema: boolean; subresources: boolean; columns: boolean }): GoLiteral {
  const pointer = (type: string, present: boolean): string => `(*${type})(${present ? '0xc000000000' : 'nil'})`;
  const slice = (type: string, present: boolean): string => (present ? `[]${type}{...}` : `[]${type}(nil)`);
  const items = versions.map((v) => 'apiextensions.CustomResourceDefinitionVersion{'
    + `Name:${goQuote(asString(v.name))}, Served:${v.served === true}, Storage:${v.storage === true}, `
    + `Deprecated:${v.deprecated === true}, DeprecationWarning:${pointer('string', typeof v.deprecationWarning === 'string')}, `
    + `Schema:${pointer('apiextensions.CustomResourceValidation', !hoisted.schema && isJsonObject(v.schema))}, `
    + `Subresources:${pointer('apiextensions.CustomResourceSubresources', !hoisted.subresources && isJsonObject(v.subresources))}, `
    + `AdditionalPrinterColumns:${slice('apiextensions.CustomResourceColumnDefinition', !hoisted.columns && asArray(v.additionalPrinterColumns).length > 0)}, `
    + `SelectableFields:${slice('apiextensions.SelectableField', asArray(v.selectableFields).length > 0)}}`);
  return new GoLiteral(`[]apiextensions.CustomResourceDefinitionVersion{${items.join(', ')}}`);
}

function conversionErrors(conversion: JsonObject): StatusCause[] {
  const strategy = asString(conversion.strategy);
  const errs = enumStringErrors('spec.conversion.strategy', strategy, ['None', 'Webhook']);
  const webhook = asObject(conversion.webhook);
  if (strategy === 'Webhook') {
    if (!isJsonObject(webhook.clientConfig)) errs.push(fe.required('spec.conversion.webhookClientConfig', 'required when strategy is set to Webhook'));
    if (!asArray(webhook.conversionReviewVersions).length) errs.push(fe.required('spec.conversion.conversionReviewVersions'));
  } else if (isJsonObject(webhook.clientConfig)) {
    errs.push(fe.forbidden('spec.conversion.webhookClientConfig', 'should not be set when strategy is not set to Webhook'));
  }
  return errs;
}

/**
 * Validate a CustomResourceDefinition (apiextensions.k8s.io/v1) as the
 * apiserver does, after applying its defaults, x-kubernetes-validations
 * rules compiled.
 */
export function validateCrd(input: KubeObject): StatusCause[] {
  const crd = deepCopy(input);
  defaultCrd(crd);
  const spec = asObject(crd.spec);
  const names = asObject(spec.names);
  const versions = asArray(spec.versions).map(asObject);
  const first = versions[0];
  const identical = (pick: (v: JsonObject) => unknown): boolean =>
    first !== undefined && versions.every((v) => semanticEqual(pick(v), pick(first)));
  const hoisted = {
    schema: identical((v) => v.schema),
    subresources: identical((v) => v.subresources),
    columns: identical((v) => v.additionalPrinterColumns),
  };
  const anyStatus = versions.some((v) => isJsonObject(asObject(v.subresources).status));

  const errs = [...metadataErrors(crd, spec, names), ...groupErrors(asString(spec.group))];
  errs.push(...enumStringErrors('spec.scope', asString(spec.scope), ['Cluster', 'Namespaced']));
  versions.forEach((v, i) => {
    if (!versionSchema(v)) errs.push(fe.required(`spec.versions[${i}].schema.openAPIV3Schema`, 'schemas are required'));
  });
  if (spec.preserveUnknownFields === true && versions.some((v) => hasDefaults(versionSchema(v)))) {
    errs.push(fe.invalid('spec.preserveUnknownFields', true, 'must be false in order to use defaults in the schema'));
  }
  versions.forEach((v, i) => {
    const path = `spec.versions[${i}]`;
    const nameMsgs = dns1035LabelErrors(asString(v.name));
    if (nameMsgs.length) errs.push(fe.invalid(`${path}.name`, asString(v.name), nameMsgs.join(',')));
    if (v.deprecated !== true && v.deprecationWarning !== undefined) {
      errs.push(fe.invalid(`${path}.deprecationWarning`, v.deprecationWarning, 'can only be set for deprecated versions'));
    }
    const schema = versionSchema(v);
    if (!hoisted.schema && schema) errs.push(...schemaErrors(schema, `${path}.schema`, isJsonObject(asObject(v.subresources).status)));
    if (!hoisted.columns) {
      asArray(v.additionalPrinterColumns).forEach((c, j) => errs.push(...columnErrors(asObject(c), `${path}.additionalPrinterColumns[${j}]`)));
    }
  });
  if (new Set(versions.map((v) => v.name)).size !== versions.length) {
    errs.push(fe.invalid('spec.versions', versionsLiteral(versions, hoisted), 'must contain unique version names'));
  }
  if (versions.filter((v) => v.storage === true).length !== 1) {
    errs.push(fe.invalid('spec.versions', versionsLiteral(versions, hoisted), 'must have exactly one version marked as storage version'));
  }
  // Conversion to the internal version copies versions[0].name into spec.version, validated again.
  const firstName = asString(first?.name);
  const firstNameMsgs = firstName ? dns1035LabelErrors(firstName) : [];
  if (firstNameMsgs.length) errs.push(fe.invalid('spec.version', firstName, firstNameMsgs.join(',')));
  errs.push(...namesErrors(names));
  const hoistedSchema = first && hoisted.schema ? versionSchema(first) : undefined;
  if (hoistedSchema) errs.push(...schemaErrors(hoistedSchema, 'spec.validation', anyStatus));
  if (first && hoisted.columns) {
    asArray(first.additionalPrinterColumns).forEach((c, j) => errs.push(...columnErrors(asObject(c), `spec.additionalPrinterColumns[${j}]`)));
  }
  errs.push(...conversionErrors(asObject(spec.conversion)));
  if (spec.preserveUnknownFields === true) {
    errs.push(fe.invalid('spec.preserveUnknownFields', true, 'cannot set to true, set x-preserve-unknown-fields to true in spec.versions[*].schema instead'));
  }
  return errs;
}
