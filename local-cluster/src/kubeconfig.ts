// The kubeconfig the local cluster writes for kubectl and client-node. Plain
// HTTP on loopback needs insecure-skip-tls-verify: client-node 1.x and 2.x
// refuse an http server otherwise; kubectl accepts either.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { stringify } from 'yaml';

export const CONTEXT_NAME = 'local-cluster';

export function kubeconfigYaml(server: string, namespace = 'default'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: CONTEXT_NAME, cluster: { server, 'insecure-skip-tls-verify': true } }],
    users: [{ name: CONTEXT_NAME, user: { token: 'local-cluster' } }],
    contexts: [{ name: CONTEXT_NAME, context: { cluster: CONTEXT_NAME, user: CONTEXT_NAME, namespace } }],
    'current-context': CONTEXT_NAME,
    preferences: {},
  });
}

/** Written atomically so a reader never sees half a file. */
export function writeKubeconfig(path: string, server: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, kubeconfigYaml(server), { mode: 0o600 });
  renameSync(tmp, path);
}
