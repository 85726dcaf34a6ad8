// What the local cluster's benchmarks share: the cluster in its own process
// (so its memory and CPU are its own), and raw requests as kubectl makes
// them, over keep-alive HTTPS with the kubeconfig's CA and bearer token.
import { spawn, type ChildProcess } from 'node:child_process';
import https from 'node:https';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as k8s from '@kubernetes/client-node';

const here = dirname(fileURLToPath(import.meta.url));

export function startCluster(dir: string): Promise<{ proc: ChildProcess; url: string; kubeconfig: string }> {
  const kubeconfig = join(dir, 'kubeconfig');
  const proc = spawn(process.execPath, ['--import', 'tsx', join(here, '../src/cli.ts'), '--kubeconfig', kubeconfig, '--work-dir', join(dir, 'work')], {
    stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /local cluster at (\S+)/.exec(out);
      if (m) resolve({ proc, url: m[1]!, kubeconfig });
    });
    proc.once('exit', (code) => reject(new Error(`cluster exited ${code}`)));
  });
}

// Raw requests as kubectl makes them: trusting the kubeconfig's CA, with its bearer token.
let agent: https.Agent | undefined;
let authorization: string;

/** Close the kept-alive connections (the bench's end). */
export function closeConnections(): void {
  agent?.destroy();
}

export function useKubeconfig(kc: k8s.KubeConfig, concurrency: number): void {
  agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca: Buffer.from(kc.getCurrentCluster()!.caData!, 'base64') });
  authorization = `Bearer ${kc.getCurrentUser()!.token!}`;
}

export function request(
  url: string, method: string, body?: unknown, accept = 'application/json', contentType = 'application/json',
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(url, {
      method, agent,
      headers: { Accept: accept, Authorization: authorization, ...(data ? { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(data) } : {}) },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

