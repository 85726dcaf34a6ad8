// What a local cluster has served, read as one reads a real API server's:
// its /metrics (kube-apiserver's apiserver_request_total), with the
// kubeconfig's credentials.
import { request } from 'node:https';
import type * as k8s from '@kubernetes/client-node';

/** The cluster's /metrics text. */
export async function clusterMetrics(kc: k8s.KubeConfig): Promise<string> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig names no cluster');
  const opts: Parameters<typeof request>[1] = { method: 'GET' };
  await kc.applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    const req = request(new URL('/metrics', server), opts, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d)).on('end', () => {
        if (res.statusCode === 200) resolve(body);
        else reject(new Error(`GET /metrics answered ${res.statusCode}: ${body.slice(0, 200)}`));
      });
    });
    req.on('error', reject).end();
  });
}

/** LISTs answered per resource ("mediajobs.mediajobs.io", "pods"), whatever their code: the sum of apiserver_request_total{verb="LIST"}. */
export async function clusterListCounts(kc: k8s.KubeConfig): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const line of (await clusterMetrics(kc)).split('\n')) {
    const m = /^apiserver_request_total\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (labels.verb !== 'LIST') continue;
    const resource = labels.group ? `${labels.resource}.${labels.group}` : labels.resource!;
    counts[resource] = (counts[resource] ?? 0) + Number(m[2]);
  }
  return counts;
}
