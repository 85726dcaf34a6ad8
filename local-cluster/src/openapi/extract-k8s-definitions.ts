// Extracts the definitions of the deploy-time built-in kinds (Deployment,
// Service, PodDisruptionBudget, NetworkPolicy, the rbac kinds, Namespace,
// ServiceAccount, ConfigMap, Secret) and everything
// they reference from Kubernetes v1.32's own OpenAPI document, into
// k8s-v1.32-definitions.json next to this file.
//
// Provenance: kubernetes/kubernetes api/openapi-spec/swagger.json at v1.32,
// as carried by kubernetes-sigs/reference-docs (gen-apidocs/config/v1_32/swagger.json,
// commit 2c424d7feec7952a83ef02e05a74e9fcf1bca736; the same bytes are
// gen-resourcesdocs/api/v1.32/swagger.json). That copy is the OpenAPI v2
// document; the v3 documents of the same release (api/openapi-spec/v3/*) are
// generated from the same Go types and differ only in form, so this script
// converts the extracted definitions as kube-openapi's builder3 does: a $ref
// becomes "#/components/schemas/...", and a $ref with siblings (a
// description) moves under allOf. What the v3 documents add and this file
// lacks: `default` values and `enum` lists, which the local cluster's
// validation does not use (the apiserver enforces both in Go code).
//
// Run: npx tsx local-cluster/src/openapi/extract-k8s-definitions.ts <swagger.json>
import { readFileSync, writeFileSync } from 'node:fs';
import { sortKeys, type Schema } from './json.js';

export const K8S_DEFINITIONS_SOURCE = 'kubernetes v1.32 api/openapi-spec/swagger.json via kubernetes-sigs/reference-docs@2c424d7feec7952a83ef02e05a74e9fcf1bca736 gen-apidocs/config/v1_32/swagger.json';

/** The kinds (and their lists) the deploy/ manifests and the chart use beyond the ones generate-builtin.ts covers. */
export const K8S_ROOTS = [
  'io.k8s.api.apps.v1.Deployment', 'io.k8s.api.apps.v1.DeploymentList',
  'io.k8s.api.core.v1.Service', 'io.k8s.api.core.v1.ServiceList',
  'io.k8s.api.policy.v1.PodDisruptionBudget', 'io.k8s.api.policy.v1.PodDisruptionBudgetList',
  'io.k8s.api.networking.v1.NetworkPolicy', 'io.k8s.api.networking.v1.NetworkPolicyList',
  'io.k8s.api.rbac.v1.Role', 'io.k8s.api.rbac.v1.RoleList',
  'io.k8s.api.rbac.v1.RoleBinding', 'io.k8s.api.rbac.v1.RoleBindingList',
  'io.k8s.api.rbac.v1.ClusterRole', 'io.k8s.api.rbac.v1.ClusterRoleList',
  'io.k8s.api.rbac.v1.ClusterRoleBinding', 'io.k8s.api.rbac.v1.ClusterRoleBindingList',
  // Served from builtin-schemas.json already; here for the decode checks of builtin-decode.ts.
  'io.k8s.api.core.v1.Namespace', 'io.k8s.api.core.v1.ServiceAccount', 'io.k8s.api.core.v1.ConfigMap', 'io.k8s.api.core.v1.Secret',
];

const V2_PREFIX = '#/definitions/';
const V3_PREFIX = '#/components/schemas/';

function toV3(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toV3);
  if (!value || typeof value !== 'object') return value;
  const obj = value as Record<string, unknown>;
  if (typeof obj.$ref === 'string') {
    const { $ref, ...siblings } = obj;
    const ref = { $ref: V3_PREFIX + $ref.slice(V2_PREFIX.length) };
    return Object.keys(siblings).length ? { ...(toV3(siblings) as object), allOf: [ref] } : ref;
  }
  return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, toV3(v)]));
}

function refsOf(value: unknown, into: string[]): void {
  if (Array.isArray(value)) value.forEach((v) => refsOf(v, into));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') into.push(v.slice(V2_PREFIX.length));
      else refsOf(v, into);
    }
  }
}

/** The roots and every definition they reach, converted to OpenAPI v3 component schemas. */
export function extract(definitions: Record<string, Schema>, roots: readonly string[]): Record<string, Schema> {
  const out: Record<string, Schema> = {};
  const queue = [...roots];
  while (queue.length) {
    const name = queue.pop()!;
    if (out[name]) continue;
    const def = definitions[name];
    if (!def) throw new Error(`definition ${name} is not in the document`);
    out[name] = toV3(def) as Schema;
    const refs: string[] = [];
    refsOf(def, refs);
    queue.push(...refs);
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: extract-k8s-definitions.ts <swagger.json of Kubernetes v1.32>');
  const doc = JSON.parse(readFileSync(file, 'utf8')) as { definitions: Record<string, Schema> };
  const schemas = extract(doc.definitions, K8S_ROOTS);
  const target = new URL('./k8s-v1.32-definitions.json', import.meta.url);
  writeFileSync(target, JSON.stringify({ source: K8S_DEFINITIONS_SOURCE, schemas: sortKeys(schemas) }, null, 1) + '\n');
  console.log(`${Object.keys(schemas).length} definitions written to ${target.pathname}`);
}
