// The container environment as the kubelet builds it (kubelet_pods.go
// makeEnvironmentVariables): envFrom first, then env in declaration order so
// later entries see earlier ones in `$(VAR)`, valueFrom resolved against the
// pod, its Secrets and ConfigMaps. Failures carry the kubelet's messages; the
// caller turns them into a CreateContainerConfigError waiting state.
import os from 'node:os';
import type { KubeObject } from '../types.js';
import { expand, mappingFor } from './expansion.js';
import type { Container, ObjectFieldSelector, Pod, ResourceFieldSelector } from './pod-types.js';

/** Read access to the objects a pod may reference, in the pod's namespace. */
export interface ObjectLookup {
  secret(name: string): KubeObject | undefined;
  configMap(name: string): KubeObject | undefined;
  /** A token for one of the pod namespace's ServiceAccounts; undefined where the cluster issues none. */
  serviceAccountToken?(serviceAccount: string): string | undefined;
}

/** A container cannot be configured (missing Secret, key, bad fieldRef...). */
export class ContainerConfigError extends Error {
  override readonly name = 'ContainerConfigError';
}

export interface NodeInfo { nodeName: string; hostIP: string; podIP: string }

/** Secret.data is base64 on the wire; stringData is only a write-time convenience but honour it if present. */
export function secretData(secret: KubeObject): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  const data = secret.data as Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(data ?? {})) if (typeof v === 'string') out[k] = Buffer.from(v, 'base64');
  const stringData = secret.stringData as Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(stringData ?? {})) if (typeof v === 'string') out[k] = Buffer.from(v, 'utf8');
  return out;
}

export function configMapData(cm: KubeObject): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  const binary = cm.binaryData as Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(binary ?? {})) if (typeof v === 'string') out[k] = Buffer.from(v, 'base64');
  const data = cm.data as Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(data ?? {})) if (typeof v === 'string') out[k] = Buffer.from(v, 'utf8');
  return out;
}

// The kubelet's secret/configmap managers report NotFound with these resource names.
const secretNotFound = (name: string) => new ContainerConfigError(`secret "${name}" not found`);
const configMapNotFound = (name: string) => new ContainerConfigError(`configmap "${name}" not found`);

/** Resolve the environment of one container; throws ContainerConfigError. */
export function resolveEnv(pod: Pod, container: Container, lookup: ObjectLookup, node: NodeInfo): Map<string, string> {
  const ns = pod.metadata.namespace ?? 'default';
  const env = new Map<string, string>();
  const secrets = new Map<string, KubeObject>();
  const configMaps = new Map<string, KubeObject>();
  const getSecret = (name: string) => {
    let s = secrets.get(name);
    if (!s) {
      s = lookup.secret(name);
      if (s) secrets.set(name, s);
    }
    return s;
  };
  const getConfigMap = (name: string) => {
    let c = configMaps.get(name);
    if (!c) {
      c = lookup.configMap(name);
      if (c) configMaps.set(name, c);
    }
    return c;
  };

  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? '';
    if (from.configMapRef) {
      const name = from.configMapRef.name ?? '';
      const cm = getConfigMap(name);
      if (!cm) {
        if (from.configMapRef.optional) continue;
        throw configMapNotFound(name);
      }
      const data = cm.data as Record<string, unknown> | undefined;
      for (const [k, v] of Object.entries(data ?? {})) if (typeof v === 'string') env.set(prefix + k, v);
    } else if (from.secretRef) {
      const name = from.secretRef.name ?? '';
      const secret = getSecret(name);
      if (!secret) {
        if (from.secretRef.optional) continue;
        throw secretNotFound(name);
      }
      for (const [k, v] of Object.entries(secretData(secret))) env.set(prefix + k, v.toString('utf8'));
    }
  }

  const mapping = mappingFor(env);
  for (const v of container.env ?? []) {
    if (!v.name) continue;
    let value = v.value ?? '';
    if (value !== '') {
      value = expand(value, mapping);
    } else if (v.valueFrom) {
      const from = v.valueFrom;
      if (from.fieldRef) {
        value = fieldRefValue(pod, from.fieldRef, node);
      } else if (from.resourceFieldRef) {
        value = resourceFieldValue(pod, container, from.resourceFieldRef);
      } else if (from.configMapKeyRef) {
        const { name = '', key = '', optional } = from.configMapKeyRef;
        const cm = getConfigMap(name);
        if (!cm) {
          if (optional) continue;
          throw configMapNotFound(name);
        }
        const data = cm.data as Record<string, unknown> | undefined;
        const found = data?.[key];
        if (typeof found !== 'string') {
          if (optional) continue;
          throw new ContainerConfigError(`couldn't find key ${key} in ConfigMap ${ns}/${name}`);
        }
        value = found;
      } else if (from.secretKeyRef) {
        const { name = '', key = '', optional } = from.secretKeyRef;
        const secret = getSecret(name);
        if (!secret) {
          if (optional) continue;
          throw secretNotFound(name);
        }
        const found = secretData(secret)[key];
        if (!found) {
          if (optional) continue;
          throw new ContainerConfigError(`couldn't find key ${key} in Secret ${ns}/${name}`);
        }
        value = found.toString('utf8');
      }
    }
    env.set(v.name, value);
  }
  return env;
}

/** A downward-API field of the pod (podFieldSelectorRuntimeValue + fieldpath.ExtractFieldPathAsString). */
export function fieldRefValue(pod: Pod, ref: ObjectFieldSelector, node: NodeInfo): string {
  const path = ref.fieldPath ?? '';
  const md = pod.metadata;
  switch (path) {
    case 'metadata.name': return md.name ?? '';
    case 'metadata.namespace': return md.namespace ?? '';
    case 'metadata.uid': return md.uid ?? '';
    case 'metadata.labels': return formatMap(md.labels);
    case 'metadata.annotations': return formatMap(md.annotations);
    case 'spec.nodeName': return pod.spec?.nodeName || node.nodeName;
    case 'spec.serviceAccountName': return pod.spec?.serviceAccountName ?? '';
    case 'status.hostIP': case 'status.hostIPs': return node.hostIP;
    case 'status.podIP': case 'status.podIPs': return node.podIP;
    case 'spec.terminationGracePeriodSeconds': return String(pod.spec?.terminationGracePeriodSeconds ?? 30);
  }
  const m = /^metadata\.(labels|annotations)\['(.*)'\]$/.exec(path);
  if (m) {
    const map = m[1] === 'labels' ? md.labels : md.annotations;
    return map?.[m[2]!] ?? '';
  }
  throw new ContainerConfigError(`unsupported fieldPath: ${path}`);
}

// fieldpath.FormatMap: sorted key="value" lines.
function formatMap(m: Record<string, string> | undefined): string {
  return Object.keys(m ?? {}).sort().map((k) => `${k}=${JSON.stringify(m![k])}`).join('\n');
}

/**
 * resourceFieldRef: the container's value, or the node's allocatable when no
 * limit is set (the kubelet defaults limits to node capacity for the
 * downward API).
 */
function resourceFieldValue(pod: Pod, container: Container, ref: ResourceFieldSelector): string {
  const target = ref.containerName
    ? [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])].find((c) => c.name === ref.containerName) ?? container
    : container;
  const resource = ref.resource ?? '';
  const [kind, name] = resource.split('.') as [string, string | undefined];
  const set = kind === 'limits' ? target.resources?.limits : target.resources?.requests;
  let raw = name ? set?.[name] : undefined;
  if (raw === undefined && kind === 'limits') {
    if (name === 'cpu') raw = os.cpus().length;
    else if (name === 'memory') raw = os.totalmem();
    else if (name === 'ephemeral-storage') raw = 0;
  }
  const amount = parseQuantity(raw ?? 0);
  const divisor = parseQuantity(ref.divisor ?? 1) || 1;
  // ConvertResourceXToString rounds up to whole divisor units.
  return String(Math.ceil(amount / divisor));
}

const SUFFIX: Record<string, number> = {
  n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

/** A resource.Quantity as a number (good enough for the downward API). */
export function parseQuantity(q: string | number): number {
  if (typeof q === 'number') return q;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?\d+)?)([a-zA-Z]*)$/.exec(q.trim());
  if (!m) return 0;
  const mult = SUFFIX[m[2]!];
  return mult === undefined ? 0 : Number(m[1]) * mult;
}
