// The kubeconfig the local cluster writes for kubectl, client-node and the
// Python client: its HTTPS URL, the certificate it serves as the CA to trust
// (serving-cert.ts) and the admin token (credentials.ts), so it is written 0600.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { stringify } from 'yaml';

export const CONTEXT_NAME = 'local-cluster';

export function kubeconfigYaml(server: string, token: string, caCert: string, namespace = 'default'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: CONTEXT_NAME, cluster: { server, 'certificate-authority-data': Buffer.from(caCert).toString('base64') } }],
    users: [{ name: CONTEXT_NAME, user: { token } }],
    contexts: [{ name: CONTEXT_NAME, context: { cluster: CONTEXT_NAME, user: CONTEXT_NAME, namespace } }],
    'current-context': CONTEXT_NAME,
    preferences: {},
  });
}

/** Written atomically so a reader never sees half a file. */
export function writeKubeconfig(path: string, server: string, token: string, caCert: string, namespace?: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, kubeconfigYaml(server, token, caCert, namespace), { mode: 0o600 });
  renameSync(tmp, path);
}
