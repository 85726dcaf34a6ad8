// patchStrategy / patchMergeKey struct tags of the built-in kinds this emulator
// serves, transcribed from k8s.io/api (core/v1, batch/v1, coordination/v1,
// apiextensions/v1) and apimachinery meta/v1 at v1.32. Only fields that carry a
// tag, or lead to one, are listed: every other field behaves as untagged
// (lists replace, objects merge), which is what the apiserver does for them.
//
// "retainKeys" (volumes, resourceClaims) is left out on purpose: it only
// changes how clients compute patches; the server honours a $retainKeys
// directive wherever it appears.

export interface FieldMeta {
  strategy?: 'merge' | 'replace';
  /** For lists of objects merged by a key. */
  mergeKey?: string;
  /** Schema of the field's object, or of each list element. */
  schema?: StructSchema;
}

export type StructSchema = Readonly<Record<string, FieldMeta>>;

const mergeBy = (mergeKey: string, schema?: StructSchema): FieldMeta =>
  (schema ? { strategy: 'merge', mergeKey, schema } : { strategy: 'merge', mergeKey });
const nested = (schema: StructSchema): FieldMeta => ({ schema });

const objectMeta: StructSchema = {
  ownerReferences: mergeBy('uid'),
  finalizers: { strategy: 'merge' }, // a set of strings: union on merge
};

// Container and EphemeralContainerCommon carry the same tags.
const container: StructSchema = {
  ports: mergeBy('containerPort'),
  env: mergeBy('name'),
  volumeMounts: mergeBy('mountPath'),
  volumeDevices: mergeBy('devicePath'),
};

const podSpec: StructSchema = {
  volumes: mergeBy('name'),
  initContainers: mergeBy('name', container),
  containers: mergeBy('name', container),
  ephemeralContainers: mergeBy('name', container),
  imagePullSecrets: mergeBy('name'),
  hostAliases: mergeBy('ip'),
  topologySpreadConstraints: mergeBy('topologyKey'),
  schedulingGates: mergeBy('name'),
  resourceClaims: mergeBy('name'),
  // tolerations, readinessGates, affinity terms … have no tags: replaced.
};

const podStatus: StructSchema = {
  conditions: mergeBy('type'),
  podIPs: mergeBy('ip'),
  hostIPs: mergeBy('ip'),
  resourceClaimStatuses: mergeBy('name'),
  // containerStatuses and friends have no tags: replaced.
};

const podTemplateSpec: StructSchema = { metadata: nested(objectMeta), spec: nested(podSpec) };

const metadataOnly: StructSchema = { metadata: nested(objectMeta) };

/** Kind → schema of the whole object. Kinds absent here have no strategic-merge schema. */
export const KIND_SCHEMAS: Readonly<Record<string, StructSchema>> = {
  Pod: { metadata: nested(objectMeta), spec: nested(podSpec), status: nested(podStatus) },
  Job: {
    metadata: nested(objectMeta),
    spec: nested({ template: nested(podTemplateSpec) }),
    status: nested({ conditions: mergeBy('type') }),
  },
  Namespace: { metadata: nested(objectMeta), status: nested({ conditions: mergeBy('type') }) },
  ServiceAccount: { metadata: nested(objectMeta), secrets: mergeBy('name') },
  Secret: metadataOnly,
  ConfigMap: metadataOnly,
  Event: metadataOnly,
  Lease: metadataOnly,
  // CRD status.conditions is +listType=map but has no patch tags: replaced.
  CustomResourceDefinition: metadataOnly,
  // Deploy-time kinds (builtin-types.ts): the patch tags of v1.32's types.go.
  Deployment: {
    metadata: nested(objectMeta),
    spec: nested({ template: nested(podTemplateSpec) }),
    status: nested({ conditions: mergeBy('type') }),
  },
  // ServiceSpec.ports: +listMapKey=port,protocol with patchMergeKey=port.
  Service: { metadata: nested(objectMeta), spec: nested({ ports: mergeBy('port') }) },
  PodDisruptionBudget: { metadata: nested(objectMeta), status: nested({ conditions: mergeBy('type') }) },
  NetworkPolicy: metadataOnly,
  Role: metadataOnly,
  RoleBinding: metadataOnly,
  ClusterRole: metadataOnly,
  ClusterRoleBinding: metadataOnly,
};
