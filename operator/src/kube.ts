// client-node wiring: one KubeConfig, the typed API clients the operator
// uses, and the helpers that make client-node 1.x speak merge patch.
import * as k8s from '@kubernetes/client-node';
import { keepAliveTransport, loadKubeConfig, makeKubeClient } from '@mediajobs/lib/kube-client';

export interface Kube {
  kc: k8s.KubeConfig;
  custom: k8s.CustomObjectsApi;
  batch: k8s.BatchV1Api;
  core: k8s.CoreV1Api;
  coordination: k8s.CoordinationV1Api;
  rbac: k8s.RbacAuthorizationV1Api;
}

export function makeKube(kubeconfigPath?: string): Kube {
  const kc = loadKubeConfig(kubeconfigPath);
  // One keep-alive transport for every client: client-node's default opens a connection per call.
  const transport = keepAliveTransport({ maxSockets: 32 });
  return {
    kc,
    custom: makeKubeClient(kc, k8s.CustomObjectsApi, transport),
    batch: makeKubeClient(kc, k8s.BatchV1Api, transport),
    core: makeKubeClient(kc, k8s.CoreV1Api, transport),
    coordination: makeKubeClient(kc, k8s.CoordinationV1Api, transport),
    rbac: makeKubeClient(kc, k8s.RbacAuthorizationV1Api, transport),
  };
}

export { MERGE_PATCH, apiStatus, isAlreadyExists, isConflict, isNotFound } from '@mediajobs/lib/kube-client';
