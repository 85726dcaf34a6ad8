// The structured-merge-diff markers of the v1.32 types (+listType,
// +listMapKey, +structType, +mapType), which kube-openapi publishes as
// x-kubernetes-list-type, x-kubernetes-list-map-keys and
// x-kubernetes-map-type. client-node's models drop them, so they are
// transcribed here from the k8s.io/api core/v1 and batch/v1 types.go, the
// apiextensions v1 types, and (meta/v1) Kubernetes' own
// api/openapi-spec/v3/api__v1_openapi.json. Server-side apply and client-go's
// apply configurations read them; client-side apply does not (it reads the
// patch tags, see generate-builtin.ts).
//
// Every array of a served schema must appear either here or in
// UNTAGGED_LISTS, so that a regenerated schema with a new list fails the
// generator instead of silently serving a list without its marker.

/** 'atomic' | 'set', or the keys of a list of type map. */
export type ListType = 'atomic' | 'set' | readonly string[];

const CORE = 'io.k8s.api.core.v1.';
const BATCH = 'io.k8s.api.batch.v1.';
const META = 'io.k8s.apimachinery.pkg.apis.meta.v1.';
const APIEXTENSIONS = 'io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.';

// Container and EphemeralContainer (EphemeralContainerCommon) carry the same markers.
const CONTAINER_LISTS: Readonly<Record<string, ListType>> = {
  args: 'atomic',
  command: 'atomic',
  env: ['name'],
  envFrom: 'atomic',
  ports: ['containerPort', 'protocol'],
  resizePolicy: 'atomic',
  volumeDevices: ['devicePath'],
  volumeMounts: ['mountPath'],
};

const AFFINITY_LISTS: Readonly<Record<string, ListType>> = {
  preferredDuringSchedulingIgnoredDuringExecution: 'atomic',
  requiredDuringSchedulingIgnoredDuringExecution: 'atomic',
};

/** Definition name → field → list type. */
export const LIST_TYPES: Readonly<Record<string, Readonly<Record<string, ListType>>>> = {
  [CORE + 'Capabilities']: { add: 'atomic', drop: 'atomic' },
  [CORE + 'CephFSVolumeSource']: { monitors: 'atomic' },
  [CORE + 'ConfigMapProjection']: { items: 'atomic' },
  [CORE + 'ConfigMapVolumeSource']: { items: 'atomic' },
  [CORE + 'Container']: CONTAINER_LISTS,
  [CORE + 'ContainerStatus']: { allocatedResourcesStatus: ['name'], volumeMounts: ['mountPath'] },
  [CORE + 'DownwardAPIProjection']: { items: 'atomic' },
  [CORE + 'DownwardAPIVolumeSource']: { items: 'atomic' },
  [CORE + 'EphemeralContainer']: CONTAINER_LISTS,
  [CORE + 'ExecAction']: { command: 'atomic' },
  [CORE + 'FCVolumeSource']: { targetWWNs: 'atomic', wwids: 'atomic' },
  [CORE + 'HTTPGetAction']: { httpHeaders: 'atomic' },
  [CORE + 'HostAlias']: { hostnames: 'atomic' },
  [CORE + 'ISCSIVolumeSource']: { portals: 'atomic' },
  [CORE + 'LinuxContainerUser']: { supplementalGroups: 'atomic' },
  [CORE + 'NamespaceSpec']: { finalizers: 'atomic' },
  [CORE + 'NamespaceStatus']: { conditions: ['type'] },
  [CORE + 'NodeAffinity']: { preferredDuringSchedulingIgnoredDuringExecution: 'atomic' },
  [CORE + 'NodeSelector']: { nodeSelectorTerms: 'atomic' },
  [CORE + 'NodeSelectorRequirement']: { values: 'atomic' },
  [CORE + 'NodeSelectorTerm']: { matchExpressions: 'atomic', matchFields: 'atomic' },
  [CORE + 'PersistentVolumeClaimSpec']: { accessModes: 'atomic' },
  [CORE + 'PodAffinity']: AFFINITY_LISTS,
  [CORE + 'PodAffinityTerm']: { matchLabelKeys: 'atomic', mismatchLabelKeys: 'atomic', namespaces: 'atomic' },
  [CORE + 'PodAntiAffinity']: AFFINITY_LISTS,
  [CORE + 'PodDNSConfig']: { nameservers: 'atomic', options: 'atomic', searches: 'atomic' },
  [CORE + 'PodSecurityContext']: { supplementalGroups: 'atomic', sysctls: 'atomic' },
  [CORE + 'PodSpec']: {
    containers: ['name'],
    ephemeralContainers: ['name'],
    hostAliases: ['ip'],
    imagePullSecrets: ['name'],
    initContainers: ['name'],
    readinessGates: 'atomic',
    resourceClaims: ['name'],
    schedulingGates: ['name'],
    tolerations: 'atomic',
    topologySpreadConstraints: ['topologyKey', 'whenUnsatisfiable'],
    volumes: ['name'],
  },
  [CORE + 'PodStatus']: {
    conditions: ['type'],
    containerStatuses: 'atomic',
    ephemeralContainerStatuses: 'atomic',
    hostIPs: 'atomic',
    initContainerStatuses: 'atomic',
    podIPs: ['ip'],
    resourceClaimStatuses: ['name'],
  },
  [CORE + 'ProjectedVolumeSource']: { sources: 'atomic' },
  [CORE + 'RBDVolumeSource']: { monitors: 'atomic' },
  [CORE + 'ResourceRequirements']: { claims: ['name'] },
  [CORE + 'ResourceStatus']: { resources: ['resourceID'] },
  [CORE + 'SecretProjection']: { items: 'atomic' },
  [CORE + 'SecretVolumeSource']: { items: 'atomic' },
  [CORE + 'ServiceAccount']: { imagePullSecrets: 'atomic', secrets: ['name'] },
  [CORE + 'TopologySpreadConstraint']: { matchLabelKeys: 'atomic' },
  [BATCH + 'JobStatus']: { conditions: 'atomic' },
  [BATCH + 'PodFailurePolicy']: { rules: 'atomic' },
  [BATCH + 'PodFailurePolicyOnExitCodesRequirement']: { values: 'set' },
  [BATCH + 'PodFailurePolicyRule']: { onPodConditions: 'atomic' },
  [BATCH + 'SuccessPolicy']: { rules: 'atomic' },
  [BATCH + 'UncountedTerminatedPods']: { failed: 'set', succeeded: 'set' },
  [META + 'DeleteOptions']: { dryRun: 'atomic' },
  [META + 'LabelSelector']: { matchExpressions: 'atomic' },
  [META + 'LabelSelectorRequirement']: { values: 'atomic' },
  [META + 'ObjectMeta']: { finalizers: 'set', managedFields: 'atomic', ownerReferences: ['uid'] },
  [META + 'StatusDetails']: { causes: 'atomic' },
  [APIEXTENSIONS + 'CustomResourceDefinitionStatus']: { conditions: ['type'] },
  [APIEXTENSIONS + 'JSONSchemaProps']: { 'x-kubernetes-validations': ['rule'] },
};

/** Types marked +structType=atomic: replaced as a whole by server-side apply. */
export const ATOMIC_STRUCTS: readonly string[] = [
  CORE + 'ConfigMapKeySelector',
  CORE + 'LocalObjectReference',
  CORE + 'NodeSelector',
  CORE + 'NodeSelectorTerm',
  CORE + 'ObjectFieldSelector',
  CORE + 'ObjectReference',
  CORE + 'ResourceFieldSelector',
  CORE + 'SecretKeySelector',
  CORE + 'TypedLocalObjectReference',
  META + 'LabelSelector',
  META + 'OwnerReference',
];

/** Map fields marked +mapType=atomic. */
export const ATOMIC_MAPS: readonly string[] = [CORE + 'PodSpec.nodeSelector'];

/**
 * Lists the real spec leaves unmarked: every List kind's items, the
 * apiextensions lists that v1.32 does not annotate, and lists of types newer
 * than v1.32 that client-node's later models bring along (their markers are
 * not part of the API this server emulates).
 */
export const UNTAGGED_LISTS: readonly string[] = [
  ...['ConfigMapList', 'EventList', 'NamespaceList', 'PodList', 'SecretList', 'ServiceAccountList'].map((l) => `${CORE}${l}.items`),
  BATCH + 'JobList.items',
  'io.k8s.api.coordination.v1.LeaseList.items',
  APIEXTENSIONS + 'CustomResourceDefinitionList.items',
  APIEXTENSIONS + 'CustomResourceDefinitionNames.categories',
  APIEXTENSIONS + 'CustomResourceDefinitionNames.shortNames',
  APIEXTENSIONS + 'CustomResourceDefinitionSpec.versions',
  APIEXTENSIONS + 'CustomResourceDefinitionStatus.storedVersions',
  APIEXTENSIONS + 'CustomResourceDefinitionVersion.additionalPrinterColumns',
  APIEXTENSIONS + 'CustomResourceDefinitionVersion.selectableFields',
  ...['allOf', 'anyOf', 'enum', 'oneOf', 'required', 'x-kubernetes-list-map-keys'].map((f) => `${APIEXTENSIONS}JSONSchemaProps.${f}`),
  APIEXTENSIONS + 'WebhookConversion.conversionReviewVersions',
  // Newer than v1.32 (container restart rules 1.34, extended resource claims 1.34).
  CORE + 'Container.restartPolicyRules',
  CORE + 'EphemeralContainer.restartPolicyRules',
  CORE + 'ContainerRestartRuleOnExitCodes.values',
  CORE + 'PodExtendedResourceClaimStatus.requestMappings',
];
