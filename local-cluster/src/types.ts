// Shapes shared by every part of the local cluster. They mirror the Kubernetes
// wire format (JSON), not a typed client model: the emulator must round-trip
// whatever a client sends, so objects stay plain JSON with a typed metadata.

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** An OpenAPI v3 schema as used by CRDs (JSONSchemaProps). */
export interface JSONSchemaProps {
  type?: string;
  format?: string;
  description?: string;
  properties?: Record<string, JSONSchemaProps>;
  additionalProperties?: JSONSchemaProps | boolean;
  items?: JSONSchemaProps;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  nullable?: boolean;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  multipleOf?: number;
  allOf?: JSONSchemaProps[];
  anyOf?: JSONSchemaProps[];
  oneOf?: JSONSchemaProps[];
  not?: JSONSchemaProps;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: string;
  'x-kubernetes-validations'?: unknown[];
  [key: string]: unknown;
}

export interface PrinterColumn {
  name: string;
  type: string; // integer | number | string | boolean | date
  format?: string;
  description?: string;
  priority?: number;
  jsonPath: string;
}

/**
 * Everything the server needs to know about one served resource, whether it
 * is built in or comes from a CustomResourceDefinition.
 */
export interface ResourceType {
  group: string; // "" for the core group
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  /** Has a /status subresource: the main endpoint ignores .status, /status keeps only it. */
  statusSubresource: boolean;
  builtin: boolean;
  /** CRD printer columns; built-in kinds print through table.ts. */
  printerColumns?: PrinterColumn[];
  /** Structural schema of a custom resource (the whole object). */
  schema?: JSONSchemaProps;
  /** Extra subresources served (e.g. "log" for pods). */
  extraSubresources?: string[];
}

/** Unique key of a resource type: "group/version/plural" ("" group for core). */
export function resourceKey(rt: Pick<ResourceType, 'group' | 'version' | 'plural'>): string {
  return `${rt.group}/${rt.version}/${rt.plural}`;
}

export function apiVersionOf(rt: Pick<ResourceType, 'group' | 'version'>): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

/** "mediajobs.mediajobs.io" style qualified resource used in error messages. */
export function qualifiedResource(rt: Pick<ResourceType, 'group' | 'plural'>): string {
  return rt.group ? `${rt.plural}.${rt.group}` : rt.plural;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent {
  type: WatchEventType;
  object: KubeObject;
}

/** A field-level validation failure, as in Status.details.causes. */
export interface StatusCause {
  reason: 'FieldValueRequired' | 'FieldValueNotSupported' | 'FieldValueInvalid' | 'FieldValueForbidden'
    | 'FieldValueTooLong' | 'FieldValueTooMany' | 'FieldValueDuplicate' | 'FieldValueTypeInvalid'
    | 'FieldValueNotFound' | string;
  message: string;
  field: string;
}

export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';
