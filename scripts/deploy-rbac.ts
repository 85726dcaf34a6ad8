// deploy/'s component identities in the local cluster: the gateway's and the
// operator's ServiceAccounts with the Roles and bindings of
// deploy/base/{serviceaccounts,rbac}.yaml (the chart's, rule for rule:
// test/deploy/kustomize.test.ts), placed in the namespaces a run uses, so
// that local mode and the tests run each component with exactly the rights
// production grants it (the local cluster enforces RBAC). Runners need
// nothing here: the operator makes each one's identity (docs/adr/0021).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubeObject, LocalCluster } from '@mediajobs/local-cluster';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The namespaces deploy/base names: the service's, and the saved destinations'. */
const BASE_NAMESPACE = 'mediajobs';
const BASE_DESTINATIONS = 'mediajobs-destinations';
const FILES = ['deploy/base/serviceaccounts.yaml', 'deploy/base/rbac.yaml'];
/** deploy/components/every-namespace: the operator's ClusterRole when it watches beyond its own namespace. */
const EVERY_NAMESPACE = 'deploy/components/every-namespace/clusterrole.yaml';

export const GATEWAY_ACCOUNT = 'mediajobs-gateway';
export const OPERATOR_ACCOUNT = 'mediajobs-operator';

export interface Placement {
  /** Where the service runs (MEDIAJOBS_NAMESPACE). */
  namespace: string;
  /** Where saved destinations' Secrets live (DESTINATIONS_NAMESPACE, else the service's). */
  destinationsNamespace: string;
  /** The operator watches other namespaces too (WATCH_NAMESPACES set): add every-namespace's ClusterRole. */
  everyNamespace?: boolean;
}

/** deploy/'s identity and RBAC objects, their namespaces (and their subjects') moved to `p`'s. */
export function deployRbacObjects(p: Placement): KubeObject[] {
  const files = [...FILES, ...(p.everyNamespace ? [EVERY_NAMESPACE] : [])];
  const place = (ns: string | undefined) => (ns === BASE_DESTINATIONS ? p.destinationsNamespace : p.namespace);
  return files.flatMap((f) => parseAllDocuments(readFileSync(`${ROOT}${f}`, 'utf8')).map((d) => d.toJSON() as KubeObject))
    .filter((o) => o && typeof o === 'object')
    .map((o) => {
      const namespaced = o.kind !== 'ClusterRole' && o.kind !== 'ClusterRoleBinding';
      const subjects = (o as { subjects?: { namespace?: string }[] }).subjects;
      return {
        ...o,
        metadata: { ...o.metadata, ...(namespaced ? { namespace: place(o.metadata.namespace) } : {}) },
        ...(subjects ? { subjects: subjects.map((s) => (s.namespace ? { ...s, namespace: place(s.namespace === BASE_NAMESPACE ? undefined : s.namespace) } : s)) } : {}),
      } as KubeObject;
    });
}

/** Create or replace deploy/'s identities and RBAC in the cluster, as its administrator. */
export function applyDeployRbac(cluster: LocalCluster, p: Placement): void {
  for (const obj of deployRbacObjects(p)) {
    const rt = cluster.api.resourceForKind(obj.apiVersion!, obj.kind!);
    if (!rt) throw new Error(`the local cluster does not serve ${obj.apiVersion} ${obj.kind}`);
    const ns = rt.namespaced ? obj.metadata.namespace : undefined;
    const current = cluster.api.getReadonly(rt, ns, obj.metadata.name!);
    if (!current) cluster.api.create(rt, ns, obj);
    else cluster.api.update(rt, ns, { ...obj, metadata: { ...obj.metadata, resourceVersion: current.metadata.resourceVersion } });
  }
}
