// The built-in kinds the local cluster serves: exactly the subset mediajobs,
// kubectl and client-node use. Names, short names and categories are those of
// a real 1.32 apiserver, so `kubectl get po`, `get all` and `get crd` work.
import type { ResourceType } from './types.js';

function builtin(
  group: string, version: string, kind: string, plural: string,
  opts: Partial<Pick<ResourceType, 'namespaced' | 'shortNames' | 'categories' | 'statusSubresource' | 'extraSubresources'>> = {},
): ResourceType {
  return {
    group,
    version,
    kind,
    listKind: `${kind}List`,
    plural,
    singular: kind.toLowerCase(),
    namespaced: opts.namespaced ?? true,
    shortNames: opts.shortNames ?? [],
    categories: opts.categories ?? [],
    statusSubresource: opts.statusSubresource ?? false,
    extraSubresources: opts.extraSubresources,
    builtin: true,
  };
}

export const NAMESPACES = builtin('', 'v1', 'Namespace', 'namespaces', { namespaced: false, shortNames: ['ns'], statusSubresource: true });
export const SECRETS = builtin('', 'v1', 'Secret', 'secrets');
export const CONFIGMAPS = builtin('', 'v1', 'ConfigMap', 'configmaps', { shortNames: ['cm'] });
export const SERVICEACCOUNTS = builtin('', 'v1', 'ServiceAccount', 'serviceaccounts', { shortNames: ['sa'] });
export const EVENTS = builtin('', 'v1', 'Event', 'events', { shortNames: ['ev'] });
export const PODS = builtin('', 'v1', 'Pod', 'pods', { shortNames: ['po'], categories: ['all'], statusSubresource: true, extraSubresources: ['log'] });
export const JOBS = builtin('batch', 'v1', 'Job', 'jobs', { categories: ['all'], statusSubresource: true });
export const LEASES = builtin('coordination.k8s.io', 'v1', 'Lease', 'leases');
export const CRDS = builtin('apiextensions.k8s.io', 'v1', 'CustomResourceDefinition', 'customresourcedefinitions', {
  namespaced: false, shortNames: ['crd', 'crds'], categories: ['api-extensions'], statusSubresource: true,
});

// Deploy-time kinds (deploy/, charts/): stored and validated against v1.32's own definitions
// (builtin-decode.ts), never acted on: no Deployment controller, no Service proxy, no policy enforcement.
export const SERVICES = builtin('', 'v1', 'Service', 'services', { shortNames: ['svc'], categories: ['all'], statusSubresource: true });
export const DEPLOYMENTS = builtin('apps', 'v1', 'Deployment', 'deployments', { shortNames: ['deploy'], categories: ['all'], statusSubresource: true });
export const PODDISRUPTIONBUDGETS = builtin('policy', 'v1', 'PodDisruptionBudget', 'poddisruptionbudgets', { shortNames: ['pdb'], statusSubresource: true });
export const NETWORKPOLICIES = builtin('networking.k8s.io', 'v1', 'NetworkPolicy', 'networkpolicies', { shortNames: ['netpol'] });
export const ROLES = builtin('rbac.authorization.k8s.io', 'v1', 'Role', 'roles');
export const ROLEBINDINGS = builtin('rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings');
export const CLUSTERROLES = builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', { namespaced: false });
export const CLUSTERROLEBINDINGS = builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', { namespaced: false });

export const BUILTIN_TYPES: readonly ResourceType[] = [
  NAMESPACES, SECRETS, CONFIGMAPS, SERVICEACCOUNTS, EVENTS, PODS, JOBS, LEASES, CRDS,
  SERVICES, DEPLOYMENTS, PODDISRUPTIONBUDGETS, NETWORKPOLICIES, ROLES, ROLEBINDINGS, CLUSTERROLES, CLUSTERROLEBINDINGS,
];

/** Namespaces every cluster starts with. */
export const INITIAL_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

/** Kinds whose objects carry metadata.generation (spec-bearing kinds in 1.32). */
export const KINDS_WITH_GENERATION = new Set(['Job', 'CustomResourceDefinition', 'Deployment', 'PodDisruptionBudget', 'NetworkPolicy']);
