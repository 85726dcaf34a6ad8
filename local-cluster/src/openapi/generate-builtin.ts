// Derives the OpenAPI v3 component schemas of the built-in kinds the local
// cluster serves from @kubernetes/client-node's generated models, because the
// real api/openapi-spec files of Kubernetes cannot be downloaded here.
//
// Every model has a `<Model>.js` with an `attributeTypeMap` (JSON name, type
// and format of each field) and a `<Model>.d.ts` whose JSDoc comments carry
// the Kubernetes descriptions and whose `?` markers tell optional from
// required fields. Model names lose the Go package, so the package of each
// model is restored from a small table by API group (see `schemaNameFor`).
//
// Limits of the source, accepted on purpose: client-node drops the field
// description of fields whose type is another model (e.g. `Job.spec`), drops
// `default` values and the x-kubernetes-* list/patch extensions (restored
// below: patch tags from patch/schemas.ts, list markers from list-types.ts),
// and is generated from a newer Kubernetes than v1.32 (a few newer optional
// fields).
//
// Run `npx tsx local-cluster/src/openapi/generate-builtin.ts` to rewrite
// builtin-schemas.json; a unit test fails when the checked-in file is stale.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KIND_SCHEMAS, type StructSchema } from '../patch/schemas.js';
import { sortKeys, type BuiltinSchemaFile, type Schema } from './json.js';
import { ATOMIC_MAPS, ATOMIC_STRUCTS, LIST_TYPES, UNTAGGED_LISTS } from './list-types.js';

interface Gvk {
  group: string;
  version: string;
  kind: string;
}

/** A served built-in kind and the client-node models of the kind and its list. */
interface Root extends Gvk {
  model: string;
  listModel: string;
}

const CORE = 'io.k8s.api.core.v1.';
const BATCH = 'io.k8s.api.batch.v1.';
const COORDINATION = 'io.k8s.api.coordination.v1.';
const APIEXTENSIONS = 'io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.';
const META = 'io.k8s.apimachinery.pkg.apis.meta.v1.';
const INTSTR = 'io.k8s.apimachinery.pkg.util.intstr.';

export const BUILTIN_ROOTS: readonly Root[] = [
  { group: '', version: 'v1', kind: 'ConfigMap', model: 'V1ConfigMap', listModel: 'V1ConfigMapList' },
  { group: '', version: 'v1', kind: 'Event', model: 'CoreV1Event', listModel: 'CoreV1EventList' },
  { group: '', version: 'v1', kind: 'Namespace', model: 'V1Namespace', listModel: 'V1NamespaceList' },
  { group: '', version: 'v1', kind: 'Pod', model: 'V1Pod', listModel: 'V1PodList' },
  { group: '', version: 'v1', kind: 'Secret', model: 'V1Secret', listModel: 'V1SecretList' },
  { group: '', version: 'v1', kind: 'ServiceAccount', model: 'V1ServiceAccount', listModel: 'V1ServiceAccountList' },
  { group: 'apiextensions.k8s.io', version: 'v1', kind: 'CustomResourceDefinition', model: 'V1CustomResourceDefinition', listModel: 'V1CustomResourceDefinitionList' },
  { group: 'batch', version: 'v1', kind: 'Job', model: 'V1Job', listModel: 'V1JobList' },
  { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', model: 'V1Lease', listModel: 'V1LeaseList' },
];

/** Models every group/version document needs for its operations (bodies and responses). */
const OPERATION_MODELS = ['V1Status', 'V1DeleteOptions'];

const META_MODELS = new Set([
  'V1DeleteOptions', 'V1LabelSelector', 'V1LabelSelectorRequirement', 'V1ListMeta', 'V1ManagedFieldsEntry',
  'V1ObjectMeta', 'V1OwnerReference', 'V1Preconditions', 'V1ShardInfo', 'V1Status', 'V1StatusCause',
  'V1StatusDetails',
]);

// Model names whose Go package is not core/v1. Anything else reachable from
// the roots is a core/v1 type (PodSpec, Container, Volume...).
const GROUP_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/^V1(Job|PodFailurePolicy|SuccessPolicy|UncountedTerminatedPods)/, BATCH],
  [/^V1Lease/, COORDINATION],
  [/^V1(CustomResource|JSONSchemaProps|ExternalDocumentation|ValidationRule|SelectableField|WebhookConversion)/, APIEXTENSIONS],
];

// client-node types some Kubernetes types as `any`/`object`; the field tells
// which Kubernetes schema it really is.
const UNTYPED_FIELDS: Record<string, string> = {
  'V1ManagedFieldsEntry.fieldsV1': META + 'FieldsV1',
  'V1JSONSchemaProps.additionalItems': APIEXTENSIONS + 'JSONSchemaPropsOrBool',
  'V1JSONSchemaProps.additionalProperties': APIEXTENSIONS + 'JSONSchemaPropsOrBool',
  'V1JSONSchemaProps.default': APIEXTENSIONS + 'JSON',
  'V1JSONSchemaProps.dependencies': APIEXTENSIONS + 'JSONSchemaPropsOrStringArray',
  'V1JSONSchemaProps.enum': APIEXTENSIONS + 'JSON',
  'V1JSONSchemaProps.example': APIEXTENSIONS + 'JSON',
  'V1JSONSchemaProps.items': APIEXTENSIONS + 'JSONSchemaPropsOrArray',
  'V1CustomResourceSubresources.status': APIEXTENSIONS + 'CustomResourceSubresourceStatus',
};

// Schemas without a client-node model (client-node maps them to Date,
// strings or `any`). Texts are the Kubernetes v1.32 type descriptions.
const HANDWRITTEN: Record<string, Schema> = {
  [META + 'Time']: {
    description: 'Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.',
    format: 'date-time',
    type: 'string',
  },
  [META + 'MicroTime']: {
    description: 'MicroTime is version of Time with microsecond level precision.',
    format: 'date-time',
    type: 'string',
  },
  [META + 'FieldsV1']: {
    description: "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format.\n\nEach key is either a '.' representing the field itself, and will always map to an empty set, or a string representing a sub-field or item. The string will follow one of these four formats: 'f:<name>', where <name> is the name of a field in a struct, or key in a map 'v:<value>', where <value> is the exact json formatted value of a list item 'i:<index>', where <index> is position of a item in a list 'k:<keys>', where <keys> is a map of  a list item's key fields to their unique values If a key maps to an empty Fields value, the field that key represents is part of the set.\n\nThe exact format is defined in sigs.k8s.io/structured-merge-diff",
    type: 'object',
  },
  [META + 'Patch']: {
    description: 'Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.',
    type: 'object',
  },
  [INTSTR + 'IntOrString']: {
    description: 'IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON field that can accept a name or number.',
    format: 'int-or-string',
    oneOf: [{ type: 'integer' }, { type: 'string' }],
  },
  [APIEXTENSIONS + 'JSON']: {
    description: 'JSON represents any valid JSON value. These types are supported: bool, int64, float64, string, []interface{}, map[string]interface{} and nil.',
  },
  [APIEXTENSIONS + 'JSONSchemaPropsOrArray']: {
    description: 'JSONSchemaPropsOrArray represents a value that can either be a JSONSchemaProps or an array of JSONSchemaProps. Mainly here for serialization purposes.',
  },
  [APIEXTENSIONS + 'JSONSchemaPropsOrBool']: {
    description: 'JSONSchemaPropsOrBool represents JSONSchemaProps or a boolean value. Defaults to true for the boolean property.',
  },
  [APIEXTENSIONS + 'JSONSchemaPropsOrStringArray']: {
    description: 'JSONSchemaPropsOrStringArray represents a JSONSchemaProps or a string array.',
  },
  [APIEXTENSIONS + 'CustomResourceSubresourceStatus']: {
    description: 'CustomResourceSubresourceStatus defines how to serve the status subresource for CustomResources. Status is represented by the `.status` JSON path inside of a CustomResource. When set, * exposes a /status subresource for the custom resource * PUT requests to the /status subresource take a custom resource object, and ignore changes to anything except the status stanza * PATCH requests to the /status subresource take a custom resource object, and ignore changes to anything except the status stanza',
    type: 'object',
  },
};

// client-node keeps no description for a field whose type is another model.
// The fields kubectl explain shows first get their Kubernetes v1.32 text back.
const SPEC_STATUS = 'More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#spec-and-status';
const MODEL_FIELD_DESCRIPTIONS: Record<string, string> = {
  'V1Job.spec': `Specification of the desired behavior of a job. ${SPEC_STATUS}`,
  'V1Job.status': `Current status of a job. ${SPEC_STATUS}`,
  'V1JobSpec.template': 'Describes the pod that will be created when executing a job. The only allowed template.spec.restartPolicy values are "Never" or "OnFailure". More info: https://kubernetes.io/docs/concepts/workloads/controllers/jobs-run-to-completion/',
  'V1JobSpec.selector': 'A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors',
  'V1Pod.spec': `Specification of the desired behavior of the pod. ${SPEC_STATUS}`,
  'V1Pod.status': `Most recently observed status of the pod. This data may not be up to date. Populated by the system. Read-only. ${SPEC_STATUS}`,
  'V1Namespace.spec': `Spec defines the behavior of the Namespace. ${SPEC_STATUS}`,
  'V1Namespace.status': `Status describes the current status of a Namespace. ${SPEC_STATUS}`,
  'V1Lease.spec': `Specification of the Lease. ${SPEC_STATUS}`,
  'V1CustomResourceDefinition.spec': 'spec describes how the user wants the resources to appear',
  'V1CustomResourceDefinition.status': 'status indicates the actual state of the CustomResourceDefinition',
  'CoreV1Event.involvedObject': 'The object that this event is about.',
  'CoreV1Event.source': 'The component reporting this event. Should be a short machine understandable string.',
};
const METADATA_DESCRIPTIONS: Record<string, string> = {
  V1ObjectMeta: "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
  V1ListMeta: 'Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
};

// client-node primitive type names that stand for a Kubernetes schema.
const PRIMITIVE_REFS: Record<string, string> = {
  Date: META + 'Time',
  V1MicroTime: META + 'MicroTime',
  IntOrString: INTSTR + 'IntOrString',
};

interface Attribute {
  name: string;
  baseName: string;
  type: string;
  format: string;
}

interface Declaration {
  description?: string;
  fields: Map<string, { description?: string; optional: boolean }>;
}

/** Kubernetes definition name of a client-node model, e.g. V1Job → io.k8s.api.batch.v1.Job. */
export function schemaNameFor(model: string): string {
  const prefixed = /^(Core|Apiextensions)V1(\w+)$/.exec(model);
  if (prefixed) return (prefixed[1] === 'Core' ? CORE : APIEXTENSIONS) + prefixed[2];
  const bare = /^V1(\w+)$/.exec(model);
  if (!bare) throw new Error(`unexpected client-node model name ${model}`);
  if (META_MODELS.has(model)) return META + bare[1];
  const match = GROUP_PATTERNS.find(([pattern]) => pattern.test(model));
  return (match ? match[1] : CORE) + bare[1];
}

function defaultModelsDir(): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('@kubernetes/client-node/package.json');
  return path.join(path.dirname(pkg), 'dist', 'gen', 'models');
}

function clientNodeVersion(modelsDir: string): string {
  const pkg = JSON.parse(readFileSync(path.join(modelsDir, '..', '..', '..', 'package.json'), 'utf8')) as { version: string };
  return `@kubernetes/client-node@${pkg.version}`;
}

function isModel(modelsDir: string, type: string): boolean {
  return /^\w+$/.test(type) && !(type in PRIMITIVE_REFS) && existsSync(path.join(modelsDir, `${type}.js`));
}

function readAttributes(modelsDir: string, model: string): Attribute[] {
  const js = readFileSync(path.join(modelsDir, `${model}.js`), 'utf8');
  const match = /\.attributeTypeMap = (\[[\s\S]*?\]);/.exec(js);
  if (!match) throw new Error(`${model}.js has no attributeTypeMap`);
  return JSON.parse(match[1]!) as Attribute[];
}

/** The generator escapes quotes and backslashes inside JSDoc text. */
function unescapeDoc(text: string): string {
  return text.replace(/\\(["'\\])/g, '$1');
}

function readDeclaration(modelsDir: string, model: string): Declaration {
  const lines = readFileSync(path.join(modelsDir, `${model}.d.ts`), 'utf8').split('\n');
  const declaration: Declaration = { fields: new Map() };
  let pending: string | undefined;
  let inComment = false;
  let commentLines: string[] = [];
  for (const line of lines) {
    const trimmed = line.trim();
    if (trimmed.startsWith('/**')) {
      inComment = true;
      commentLines = [];
      continue;
    }
    if (inComment) {
      if (trimmed.startsWith('*/')) {
        inComment = false;
        pending = commentLines.length ? unescapeDoc(commentLines.join(' ')) : undefined;
      } else {
        commentLines.push(trimmed.replace(/^\*\s?/, ''));
      }
      continue;
    }
    if (trimmed.startsWith('export declare class')) {
      declaration.description = pending;
    } else {
      const field = /^'([^']+)'(\?)?:/.exec(trimmed);
      if (field) declaration.fields.set(field[1]!, { description: pending, optional: field[2] === '?' });
    }
    // A comment documents only the line right after it.
    if (trimmed) pending = undefined;
  }
  return declaration;
}

function ref(name: string): Schema {
  return { $ref: `#/components/schemas/${name}` };
}

interface TypeContext {
  modelsDir: string;
  /** "Model.field" for the UNTYPED_FIELDS lookup. */
  field: string;
  found: (model: string) => void;
}

/** Schema for a client-node type string such as "Array<V1Container>". */
function typeSchema(type: string, format: string, ctx: TypeContext): Schema {
  const array = /^Array<(.+)>$/.exec(type);
  if (array) return { items: typeSchema(array[1]!, format, ctx), type: 'array' };
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return { additionalProperties: typeSchema(map[1]!, format, ctx), type: 'object' };
  if (type in PRIMITIVE_REFS) return ref(PRIMITIVE_REFS[type]!);
  switch (type) {
    case 'string':
      return format ? { format, type: 'string' } : { type: 'string' };
    case 'boolean':
      return { type: 'boolean' };
    case 'number':
      if (format === 'int32' || format === 'int64') return { format, type: 'integer' };
      return format ? { format, type: 'number' } : { type: 'number' };
    case 'any':
    case 'object': {
      const target = UNTYPED_FIELDS[ctx.field];
      if (!target) throw new Error(`${ctx.field} is typed "${type}" by client-node; add it to UNTYPED_FIELDS`);
      return ref(target);
    }
  }
  if (!isModel(ctx.modelsDir, type)) throw new Error(`${ctx.field}: unknown client-node type ${type}`);
  ctx.found(type);
  return ref(schemaNameFor(type));
}

/**
 * OpenAPI v3 (as kube-openapi's builder3 writes it) puts siblings of a $ref
 * under allOf, because a $ref with siblings is not valid there.
 */
function withDescription(schema: Schema, description: string | undefined): Schema {
  if (!description) return schema;
  if ('$ref' in schema) return { allOf: [schema], description };
  return { ...schema, description };
}

function fallbackDescription(model: string, attribute: Attribute): string | undefined {
  if (attribute.baseName === 'metadata') return METADATA_DESCRIPTIONS[attribute.type];
  return MODEL_FIELD_DESCRIPTIONS[`${model}.${attribute.baseName}`];
}

function modelSchema(modelsDir: string, model: string, found: (model: string) => void): Schema {
  const declaration = readDeclaration(modelsDir, model);
  const properties: Record<string, Schema> = {};
  const required: string[] = [];
  for (const attribute of readAttributes(modelsDir, model)) {
    const field = declaration.fields.get(attribute.name);
    const ctx = { modelsDir, field: `${model}.${attribute.baseName}`, found };
    const description = field?.description ?? fallbackDescription(model, attribute);
    properties[attribute.baseName] = withDescription(typeSchema(attribute.type, attribute.format, ctx), description);
    if (field && !field.optional) required.push(attribute.baseName);
  }
  const schema: Schema = {};
  if (declaration.description) schema.description = declaration.description;
  schema.properties = properties;
  if (required.length) schema.required = required;
  schema.type = 'object';
  return schema;
}

function gvkTag(gvks: Gvk[]): Schema[] {
  return gvks.map(({ group, kind, version }) => ({ group, kind, version }));
}

function tagKinds(schemas: Record<string, Schema>): void {
  for (const root of BUILTIN_ROOTS) {
    const { group, version } = root;
    schemas[schemaNameFor(root.model)]!['x-kubernetes-group-version-kind'] = gvkTag([{ group, version, kind: root.kind }]);
    schemas[schemaNameFor(root.listModel)]!['x-kubernetes-group-version-kind'] = gvkTag([{ group, version, kind: `${root.kind}List` }]);
  }
  schemas[META + 'Status']!['x-kubernetes-group-version-kind'] = gvkTag([{ group: '', version: 'v1', kind: 'Status' }]);
  // DeleteOptions is registered in every group the server installs.
  const groups = [...new Set(BUILTIN_ROOTS.map((r) => `${r.group}/${r.version}`))].sort();
  schemas[META + 'DeleteOptions']!['x-kubernetes-group-version-kind'] = gvkTag(groups.map((gv) => {
    const [group, version] = gv.split('/') as [string, string];
    return { group, version, kind: 'DeleteOptions' };
  }));
}

// kubectl apply computes its three-way strategic merge patch from the
// x-kubernetes-patch-strategy / x-kubernetes-patch-merge-key of the kind's
// /openapi/v3 schema (PatchMetaFromOpenAPIV3). Without them a Job's containers
// look like an atomic list: the server's defaults (terminationMessagePath,
// imagePullPolicy ...) make every re-apply send the whole list and report
// "configured". The tags are the struct tags the server merges with, so they
// come from patch/schemas.ts.
function tagPatchStrategies(schemas: Record<string, Schema>): void {
  const tag = (schemaName: string, field: string, strategy: string, mergeKey: string | undefined): void => {
    const prop = propertyOf(schemas, schemaName, field);
    const path = `${schemaName}.${field}`;
    const existing = prop['x-kubernetes-patch-strategy'];
    if (existing !== undefined && existing !== strategy) throw new Error(`${path}: patch strategy ${String(existing)} and ${strategy}`);
    prop['x-kubernetes-patch-strategy'] = strategy;
    if (mergeKey) prop['x-kubernetes-patch-merge-key'] = mergeKey;
  };
  const overridden = new Set<string>();
  const walk = (schemaName: string, struct: StructSchema): void => {
    for (const [field, meta] of Object.entries(struct)) {
      const path = `${schemaName}.${field}`;
      const override = OPENAPI_ONLY_STRATEGIES[path];
      if (override) overridden.add(path);
      if (meta.strategy) tag(schemaName, field, override ?? meta.strategy, meta.mergeKey);
      if (meta.schema) walk(refTarget(propertyOf(schemas, schemaName, field), path), meta.schema);
    }
  };
  for (const root of BUILTIN_ROOTS) {
    const struct = KIND_SCHEMAS[root.kind];
    if (!struct) throw new Error(`patch/schemas.ts has no schema for ${root.kind}`);
    walk(schemaNameFor(root.model), struct);
  }
  for (const path of Object.keys(OPENAPI_ONLY_STRATEGIES)) {
    if (!overridden.has(path)) throw new Error(`${path} is not a patch/schemas.ts field: its strategy override applies nowhere`);
  }
  for (const [path, { strategy, mergeKey }] of Object.entries(OPENAPI_ONLY_TAGS)) {
    const dot = path.lastIndexOf('.');
    tag(path.slice(0, dot), path.slice(dot + 1), strategy, mergeKey);
  }
}

// Patch tags that only change how clients compute patches, so the server's
// table (patch/schemas.ts) leaves them out: retainKeys (the server honours a
// $retainKeys directive wherever it appears), and merge keys inside lists the
// server replaces whole (containerStatuses) or on kinds it merges without
// keys (CRD schemas).
const OPENAPI_ONLY_STRATEGIES: Readonly<Record<string, string>> = {
  [CORE + 'PodSpec.volumes']: 'merge,retainKeys',
  [CORE + 'PodSpec.resourceClaims']: 'merge,retainKeys',
  [CORE + 'PodStatus.resourceClaimStatuses']: 'merge,retainKeys',
};
const OPENAPI_ONLY_TAGS: Readonly<Record<string, { strategy: string; mergeKey: string }>> = {
  [CORE + 'ContainerStatus.volumeMounts']: { strategy: 'merge', mergeKey: 'mountPath' },
  [CORE + 'ContainerStatus.allocatedResourcesStatus']: { strategy: 'merge', mergeKey: 'name' },
  [APIEXTENSIONS + 'JSONSchemaProps.x-kubernetes-validations']: { strategy: 'merge', mergeKey: 'rule' },
};

/** Publishes list-types.ts, and fails on an array that is neither tagged nor known to be untagged. */
function tagListTypes(schemas: Record<string, Schema>): void {
  for (const [schemaName, fields] of Object.entries(LIST_TYPES)) {
    for (const [field, listType] of Object.entries(fields)) {
      const prop = propertyOf(schemas, schemaName, field);
      if (prop.type !== 'array') throw new Error(`${schemaName}.${field} has a list type but is not an array`);
      if (typeof listType === 'string') {
        prop['x-kubernetes-list-type'] = listType;
      } else {
        prop['x-kubernetes-list-map-keys'] = [...listType];
        prop['x-kubernetes-list-type'] = 'map';
      }
    }
  }
  for (const name of ATOMIC_STRUCTS) {
    const schema = schemas[name];
    if (!schema) throw new Error(`ATOMIC_STRUCTS names ${name}, which no served schema has`);
    schema['x-kubernetes-map-type'] = 'atomic';
  }
  for (const path of ATOMIC_MAPS) {
    const dot = path.lastIndexOf('.');
    propertyOf(schemas, path.slice(0, dot), path.slice(dot + 1))['x-kubernetes-map-type'] = 'atomic';
  }
  const untagged = new Set(UNTAGGED_LISTS);
  for (const [schemaName, schema] of Object.entries(schemas)) {
    for (const [field, prop] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) {
      const path = `${schemaName}.${field}`;
      if (prop.type !== 'array') continue;
      const tagged = prop['x-kubernetes-list-type'] !== undefined;
      if (!tagged && !untagged.has(path)) throw new Error(`${path} is a list without a list type: add it to list-types.ts`);
      if (tagged && untagged.has(path)) throw new Error(`${path} is both tagged and in UNTAGGED_LISTS`);
    }
  }
}

function propertyOf(schemas: Record<string, Schema>, schemaName: string, field: string): Schema {
  const prop = (schemas[schemaName]?.properties as Record<string, Schema> | undefined)?.[field];
  if (!prop) throw new Error(`no served schema has ${schemaName}.${field}`);
  return prop;
}

/** The component a field refers to, through allOf (fields with a description) or array items. */
function refTarget(prop: Schema, path: string): string {
  const items = prop.items as Schema | undefined;
  const allOf = prop.allOf as Schema[] | undefined;
  const ref = (prop.$ref ?? allOf?.[0]?.$ref ?? items?.$ref) as string | undefined;
  if (!ref) throw new Error(`${path} refers to no component schema`);
  return ref.slice('#/components/schemas/'.length);
}

/** Builds the schemas of the transitive closure of the served built-in kinds. */
export function generateBuiltinSchemas(modelsDir = defaultModelsDir()): BuiltinSchemaFile {
  const schemas: Record<string, Schema> = {};
  const queue = [...BUILTIN_ROOTS.flatMap((r) => [r.model, r.listModel]), ...OPERATION_MODELS];
  const seen = new Set(queue);
  const found = (model: string): void => {
    if (!seen.has(model)) {
      seen.add(model);
      queue.push(model);
    }
  };
  for (let model = queue.shift(); model; model = queue.shift()) {
    const name = schemaNameFor(model);
    if (schemas[name]) throw new Error(`${model} and another model both map to ${name}`);
    schemas[name] = modelSchema(modelsDir, model, found);
  }
  Object.assign(schemas, HANDWRITTEN);
  tagKinds(schemas);
  tagPatchStrategies(schemas);
  tagListTypes(schemas);
  return sortKeys({ source: clientNodeVersion(modelsDir), schemas });
}

export function serializeBuiltinSchemas(file: BuiltinSchemaFile): string {
  return JSON.stringify(file, null, 1) + '\n';
}

export const BUILTIN_SCHEMAS_PATH = fileURLToPath(new URL('./builtin-schemas.json', import.meta.url));

function main(): void {
  writeFileSync(BUILTIN_SCHEMAS_PATH, serializeBuiltinSchemas(generateBuiltinSchemas()));
  console.log(`wrote ${path.relative(process.cwd(), BUILTIN_SCHEMAS_PATH)}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
