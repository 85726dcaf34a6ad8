// client-node wiring: one KubeConfig, the typed API clients the operator
// uses, and the helpers that make client-node 1.x speak merge patch.
import * as k8s from '@kubernetes/client-node';
import { keepAliveTransport, makeKubeClient } from '@mediajobs/lib/kube-client';

export interface Kube {
  kc: k8s.KubeConfig;
  custom: k8s.CustomObjectsApi;
  batch: k8s.BatchV1Api;
  core: k8s.CoreV1Api;
  coordination: k8s.CoordinationV1Api;
}

export function makeKube(kubeconfigPath?: string): Kube {
  const kc = new k8s.KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromDefault();
  // One keep-alive transport for every client: client-node's default opens a connection per call.
  const transport = keepAliveTransport({ maxSockets: 32 });
  return {
    kc,
    custom: makeKubeClient(kc, k8s.CustomObjectsApi, transport),
    batch: makeKubeClient(kc, k8s.BatchV1Api, transport),
    core: makeKubeClient(kc, k8s.CoreV1Api, transport),
    coordination: makeKubeClient(kc, k8s.CoordinationV1Api, transport),
  };
}

/** client-node 1.x sends JSON patch unless told otherwise. */
export const MERGE_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

/** The HTTP status of a client-node ApiException, or undefined for other errors. */
export function apiStatus(err: unknown): number | undefined {
  if (err instanceof k8s.ApiException) return err.code;
  return undefined;
}

export function isNotFound(err: unknown): boolean {
  return apiStatus(err) === 404;
}

export function isAlreadyExists(err: unknown): boolean {
  return apiStatus(err) === 409 && err instanceof k8s.ApiException && String(err.body).includes('AlreadyExists');
}

export function isConflict(err: unknown): boolean {
  return apiStatus(err) === 409;
}
