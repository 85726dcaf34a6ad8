// What the local cluster's benchmarks share: the cluster in its own process
// (so its memory and CPU are its own), and raw requests as kubectl makes
// them, over keep-alive HTTPS with the kubeconfig's CA and bearer token.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';

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


/** One printed figure: what, its value, and the goal ('' when none). */
export type Row = [what: string, value: string, goal: string];

/**
 * Run a benchmark against a fresh cluster process (its kubeconfig loaded, raw
 * requests set up for `concurrency`), print its rows under its title, and
 * exit: 1 with the error when it failed.
 */
export function benchmark(
  concurrency: number,
  body: (c: { proc: ChildProcess; url: string; kc: k8s.KubeConfig }) => Promise<{ title: string; rows: Row[]; width: [number, number] }>,
): void {
  const run = async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lc-bench-'));
    const { proc, url, kubeconfig } = await startCluster(dir);
    try {
      const kc = new k8s.KubeConfig();
      kc.loadFromFile(kubeconfig);
      useKubeconfig(kc, concurrency);
      const { title, rows, width: [w, v] } = await body({ proc, url, kc });
      process.stdout.write(`\n${title}\n`);
      for (const [what, value, goal] of rows) process.stdout.write(`  ${what.padEnd(w)} ${value.padStart(v)}   ${goal}\n`);
    } finally {
      proc.kill('SIGTERM');
      agent?.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  run().then(() => process.exit(0), (e: unknown) => {
    process.stderr.write(`bench failed: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
