// OpenAPI v3 as kube-apiserver serves it: GET /openapi/v3 lists one document
// per group/version, each with the REST paths of the served resources and
// the component schemas they use.
//
// What clients rely on:
// - kubectl apply (--validate=strict) looks for a PATCH operation tagged with
//   the kind's x-kubernetes-group-version-kind that has a fieldValidation
//   parameter (cli-runtime query_param_verifier_v3.go); only then does it
//   send fieldValidation=Strict instead of falling back to /openapi/v2.
// - kubectl explain (kubectl/pkg/explain/v2 plaintext.tmpl) takes the GVK from
//   an operation on /<prefix>/<resource>[/{name}] (or the namespaced form) and
//   then the component schema whose x-kubernetes-group-version-kind list
//   contains that GVK; it prints `required` and `enum` from the schema.
//
// Built-in schemas come from builtin-schemas.json (see generate-builtin.ts);
// custom resource documents follow apiextensions-apiserver's
// controller/openapi/builder/builder.go.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { k8sDefinitions } from '../builtin-decode.js';
import { deepCopy } from '../object-meta.js';
import type { JSONSchemaProps, ResourceType } from '../types.js';
import { sortKeys, type BuiltinSchemaFile, type Schema } from './json.js';
import { resourcePaths, type KindNames } from './paths.js';

const SCHEMA_REF_PREFIX = '#/components/schemas/';
const META = 'io.k8s.apimachinery.pkg.apis.meta.v1.';
const STATUS = META + 'Status';
const DELETE_OPTIONS = META + 'DeleteOptions';
const PATCH = META + 'Patch';

// Go-generated TypeMeta and PartialObjectMetadata(List) field descriptions,
// which the CRD builder puts on every custom resource schema.
const API_VERSION_DESCRIPTION = 'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources';
const KIND_DESCRIPTION = 'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds';
const OBJECT_METADATA_DESCRIPTION = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DESCRIPTION = 'Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds';
const EMBEDDED_API_VERSION_DESCRIPTION = 'apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources';
const EMBEDDED_KIND_DESCRIPTION = 'kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds';

let builtinFile: BuiltinSchemaFile | undefined;
let merged: Record<string, Schema> | undefined;

/**
 * The checked-in built-in schemas, read once: builtin-schemas.json, plus the
 * deploy-time kinds from Kubernetes v1.32's own definitions
 * (k8s-v1.32-definitions.json) for names the first file lacks.
 */
export function builtinSchemas(): Record<string, Schema> {
  builtinFile ??= JSON.parse(readFileSync(new URL('./builtin-schemas.json', import.meta.url), 'utf8')) as BuiltinSchemaFile;
  merged ??= { ...k8sDefinitions(), ...builtinFile.schemas };
  return merged;
}

/** "api/v1" or "apis/<group>/<version>": the key of a document in GET /openapi/v3. */
export function groupVersionPath(rt: Pick<ResourceType, 'group' | 'version'>): string {
  return rt.group ? `apis/${rt.group}/${rt.version}` : `api/${rt.version}`;
}

/** kube-openapi handler3 computeETag: upper-case hex SHA-512 of the served JSON bytes. */
export function openApiHash(json: string): string {
  return createHash('sha512').update(json).digest('hex').toUpperCase();
}

/** GET /openapi/v3. */
export function openApiIndex(types: ResourceType[]): object {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const groupPath of [...new Set(types.map(groupVersionPath))].sort()) {
    const hash = openApiHash(openApiDocumentJson(types, groupPath)!);
    paths[groupPath] = { serverRelativeURL: `/openapi/v3/${groupPath}?hash=${hash}` };
  }
  return { paths };
}

/** GET /openapi/v3/<groupPath>; undefined when nothing is served there. */
export function openApiDocument(types: ResourceType[], groupPath: string): object | undefined {
  const json = openApiDocumentJson(types, groupPath);
  return json === undefined ? undefined : (JSON.parse(json) as object);
}

// One cached document per group/version, rebuilt when its served types change.
const documentCache = new Map<string, { signature: string; json: string }>();

/**
 * The exact bytes to serve for GET /openapi/v3/<groupPath>; the hash in the
 * index is computed from them, so serve this string rather than re-encoding.
 */
export function openApiDocumentJson(types: ResourceType[], groupPath: string): string | undefined {
  const served = types.filter((t) => groupVersionPath(t) === groupPath);
  if (!served.length) return undefined;
  const signature = JSON.stringify(served);
  const cached = documentCache.get(groupPath);
  if (cached?.signature === signature) return cached.json;
  const json = JSON.stringify(sortKeys(buildDocument(served)));
  documentCache.set(groupPath, { signature, json });
  return json;
}

function buildDocument(served: ResourceType[]): Schema {
  const builtin = served.every((t) => t.builtin);
  const schemas: Record<string, Schema> = {};
  const paths: Record<string, Schema> = {};
  for (const rt of served) {
    const names = kindSchemas(rt, schemas);
    Object.assign(paths, resourcePaths(rt, names));
  }
  const document: Schema = {
    openapi: '3.0.0',
    // Built-in documents are titled like kube-apiserver's; CRD ones like the CRD builder's.
    info: builtin ? { title: 'Kubernetes', version: 'unversioned' } : { title: 'Kubernetes CRD Swagger', version: 'v0.1.0' },
    paths,
    components: { schemas: withReferencedSchemas(schemas) },
  };
  if (builtin) {
    (document.components as Schema).securitySchemes = {
      BearerToken: { description: 'Bearer Token authentication', in: 'header', name: 'authorization', type: 'apiKey' },
    };
  }
  return document;
}

function gvkOf(rt: ResourceType, kind = rt.kind): { group: string; kind: string; version: string } {
  return { group: rt.group, kind, version: rt.version };
}

function hasGvk(schema: Schema, gvk: { group: string; kind: string; version: string }): boolean {
  const tags = schema['x-kubernetes-group-version-kind'];
  return Array.isArray(tags) && tags.some((t: Record<string, string>) => t.group === gvk.group && t.version === gvk.version && t.kind === gvk.kind);
}

function findBuiltinSchema(gvk: { group: string; kind: string; version: string }): string | undefined {
  return Object.entries(builtinSchemas()).find(([, s]) => hasGvk(s, gvk))?.[0];
}

/** Adds the schemas of rt's kind and list kind, returning their names. */
function kindSchemas(rt: ResourceType, schemas: Record<string, Schema>): KindNames {
  if (rt.builtin) {
    const kind = findBuiltinSchema(gvkOf(rt));
    const list = findBuiltinSchema(gvkOf(rt, rt.listKind));
    if (kind && list) {
      schemas[kind] = builtinSchemas()[kind]!;
      schemas[list] = builtinSchemas()[list]!;
      return { kind, list };
    }
  }
  const names = { kind: restFriendlyName(rt, rt.kind), list: restFriendlyName(rt, rt.listKind) };
  schemas[names.kind] = customResourceSchema(rt);
  schemas[names.list] = customResourceListSchema(rt, names.kind);
  return names;
}

/** kube-openapi util.ToRESTFriendlyName("<group>/<version>.<Kind>"): mediajobs.io → io.mediajobs.v1alpha1.MediaJob. */
export function restFriendlyName(rt: Pick<ResourceType, 'group' | 'version'>, kind: string): string {
  const group = rt.group.split('.').reverse().join('.');
  return `${group}.${rt.version}.${kind}`;
}

function ref(name: string): Schema {
  return { $ref: SCHEMA_REF_PREFIX + name };
}

/** builder3 WrapRefs: a $ref with siblings is moved under allOf. */
function refWithDescription(name: string, description: string): Schema {
  return { allOf: [ref(name)], description };
}

/** builder.go buildKubeNative: the CRD schema plus TypeMeta, ObjectMeta and the GVK tag. */
function customResourceSchema(rt: ResourceType): Schema {
  const tag = { 'x-kubernetes-group-version-kind': [gvkOf(rt)] };
  if (!rt.schema) return { type: 'object', ...tag };
  const schema = unfold(deepCopy(rt.schema));
  schema.properties = {
    ...schema.properties,
    metadata: refWithDescription(META + 'ObjectMeta', OBJECT_METADATA_DESCRIPTION) as JSONSchemaProps,
    apiVersion: { description: API_VERSION_DESCRIPTION, type: 'string' },
    kind: { description: KIND_DESCRIPTION, type: 'string' },
  };
  return { ...schema, ...tag };
}

/**
 * structural schema Unfold plus addEmbeddedProperties: int-or-string gets its
 * anyOf, embedded resources get apiVersion/kind/metadata.
 */
function unfold(schema: JSONSchemaProps): JSONSchemaProps {
  for (const key of Object.keys(schema.properties ?? {})) schema.properties![key] = unfold(schema.properties![key]!);
  if (schema.items && typeof schema.items === 'object') schema.items = unfold(schema.items);
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
    schema.additionalProperties = unfold(schema.additionalProperties);
  }
  if (schema['x-kubernetes-int-or-string'] && !schema.anyOf) schema.anyOf = [{ type: 'integer' }, { type: 'string' }];
  if (schema['x-kubernetes-embedded-resource']) {
    schema.properties = {
      ...schema.properties,
      apiVersion: { description: EMBEDDED_API_VERSION_DESCRIPTION, type: 'string' },
      kind: { description: EMBEDDED_KIND_DESCRIPTION, type: 'string' },
      metadata: refWithDescription(META + 'ObjectMeta', OBJECT_METADATA_DESCRIPTION) as JSONSchemaProps,
    };
    const required = schema.required ?? [];
    schema.required = [...required, ...['kind', 'apiVersion'].filter((f) => !required.includes(f))];
  }
  return schema;
}

/** builder.go buildListSchema. */
function customResourceListSchema(rt: ResourceType, kindName: string): Schema {
  return {
    description: `${rt.listKind} is a list of ${rt.kind}`,
    required: ['items'],
    properties: {
      apiVersion: { description: API_VERSION_DESCRIPTION, type: 'string' },
      items: {
        description: `List of ${rt.plural}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md`,
        items: ref(kindName),
        type: 'array',
      },
      kind: { description: KIND_DESCRIPTION, type: 'string' },
      metadata: refWithDescription(META + 'ListMeta', LIST_METADATA_DESCRIPTION),
    },
    'x-kubernetes-group-version-kind': [gvkOf(rt, rt.listKind)],
  };
}

function collectRefs(value: unknown, into: Set<string>): void {
  if (Array.isArray(value)) {
    for (const item of value) collectRefs(item, into);
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string' && item.startsWith(SCHEMA_REF_PREFIX)) {
        into.add(item.slice(SCHEMA_REF_PREFIX.length));
      } else {
        collectRefs(item, into);
      }
    }
  }
}

/** Adds every built-in schema the document's own schemas and operations reach. */
function withReferencedSchemas(schemas: Record<string, Schema>): Record<string, Schema> {
  const result = { ...schemas };
  const initial = new Set<string>([STATUS, DELETE_OPTIONS, PATCH]);
  collectRefs(schemas, initial);
  const queue = [...initial];
  const seen = new Set<string>();
  while (queue.length) {
    const name = queue.pop()!;
    if (seen.has(name)) continue;
    seen.add(name);
    const schema = result[name] ?? builtinSchemas()[name];
    if (!schema) throw new Error(`OpenAPI schema ${name} is referenced but not known`);
    result[name] = schema;
    const refs = new Set<string>();
    collectRefs(schema, refs);
    queue.push(...refs);
  }
  return result;
}
