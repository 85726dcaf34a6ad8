// An operator left idle on real timers (issue 34's benchmark): local mode as
// `make run` starts it, in a state folder and on ports of its own, left alone
// for IDLE_SECONDS (default 2700: 45 minutes, past one periodic relist at 30
// minutes and three watchdog periods of 10), then given 20 jobs of media made
// with ffmpeg and served on 127.0.0.1. Prints the LISTs the local cluster
// answered per kind while idle (its /metrics; goal: the start's and one
// relist's, 2 per informer kind), the warning lines logged while idle (goal:
// none), and how the 20 jobs ended (goal: all Completed).
//
//   npx tsx test/soak/idle-local-mode.ts        (make soak-idle)
//
// IDLE_SECONDS (2700), IDLE_JOBS (20).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { freePort, loadAverage, machine, root, rowPrinter, runBench, sleep } from '../../api-gateway/bench/support.js';
import { startMediaServer } from '../support/media.js';
import { tsxCommand } from '../support/tsx.js';
import { clusterListCounts } from '../support/cluster-metrics.js';

const IDLE_SECONDS = Number(process.env.IDLE_SECONDS ?? 2700);
const JOBS = Number(process.env.IDLE_JOBS ?? 20);

runBench(async () => {
  const loadAtStart = loadAverage();
  const dir = mkdtempSync(join(tmpdir(), 'mj-idle-'));
  const media = await startMediaServer();
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, MEDIAJOBS_LOCAL_DIR: join(dir, 'local'), PORT: String(port), OUTBOUND_ALLOW_PRIVATE: 'true', LOG_FORMAT: 'json' };
  for (const k of ['DATABASE_URL', 'KUBECONFIG', 'LOCAL_CLUSTER_PORT', 'LOCAL_CLUSTER_WATCH_FAULTS']) delete env[k];
  env.EMBEDDED_PG_PORT = String(await freePort());
  env.METRICS_PORT = String(await freePort());
  const [cmd, ...args] = tsxCommand(join(root, 'scripts/local-mode.ts'));
  const proc = spawn(cmd!, args, { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  try {
    const banner = await waitBanner(() => out, proc.exitCode);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(banner.kubeconfig);
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${banner.baseUrl}${path}`, {
        method, headers: { 'x-api-key': banner.devKey, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    while (!(await fetch(`${banner.baseUrl}/readyz`).then((r) => r.ok, () => false))) await sleep(200);

    const listsAtStart = await clusterListCounts(kc);
    const idleFrom = Date.now();
    const linesAtStart = out.length;
    process.stdout.write(`idle-local-mode: local mode ready (LISTs so far ${JSON.stringify(listsAtStart)}); idle for ${IDLE_SECONDS} s...\n`);
    for (let s = 0; s < IDLE_SECONDS; s += 60) {
      await sleep(Math.min(60, IDLE_SECONDS - s) * 1000);
      if (proc.exitCode !== null) throw new Error(`local mode exited ${proc.exitCode} while idle:\n${out.slice(-3000)}`);
      if (s % 600 === 0) process.stdout.write(`  ${Math.round((Date.now() - idleFrom) / 1000)} s idle, LISTs ${JSON.stringify(await clusterListCounts(kc))}\n`);
    }
    const listsAtEnd = await clusterListCounts(kc);
    const idleWarnings = out.slice(linesAtStart).split('\n').filter(isWarning);

    const ids: string[] = [];
    const startedJobs = Date.now();
    for (let i = 0; i < JOBS; i++) {
      const r = await api('POST', '/jobs', { url: media.mp4Url });
      if (r.status !== 201) throw new Error(`POST /jobs answered ${r.status}: ${JSON.stringify(r.body)}`);
      ids.push(r.body.job_id as string);
    }
    const ended = new Map<string, string>();
    while (ended.size < ids.length && Date.now() - startedJobs < 600_000) {
      for (const id of ids.filter((i) => !ended.has(i))) {
        const status = (await api('GET', `/jobs/${id}`)).body.status as string;
        if (!['Pending', 'Queued', 'Processing'].includes(status)) ended.set(id, status);
      }
      await sleep(1000);
    }
    const byStatus: Record<string, number> = {};
    for (const id of ids) byStatus[ended.get(id) ?? 'not ended'] = (byStatus[ended.get(id) ?? 'not ended'] ?? 0) + 1;

    const row = rowPrinter(56, 24);
    process.stdout.write(`\nIdle operator on real timers (${machine(loadAtStart)}; ${Math.round((Date.now() - idleFrom) / 1000 - (Date.now() - startedJobs) / 1000)} s idle, local mode)\n`);
    for (const kind of Object.keys(listsAtEnd).sort()) {
      row(`LISTs of ${kind} while idle`, String(listsAtEnd[kind]! - (listsAtStart[kind] ?? 0)), 'informer kinds: ≤ 1 per 30 min');
    }
    row('LISTs before the idle period (the start)', JSON.stringify(listsAtStart));
    row('warning lines while idle', String(idleWarnings.length), '0');
    for (const w of idleWarnings.slice(0, 10)) process.stdout.write(`    ${w.slice(0, 240)}\n`);
    row(`${JOBS} jobs after the idle period`, JSON.stringify(byStatus), `{"Completed":${JOBS}}`);
    row('time to end them all, s', ((Date.now() - startedJobs) / 1000).toFixed(1));
  } finally {
    try {
      process.kill(-proc.pid!, 'SIGINT');
    } catch {
      // already gone
    }
    await Promise.race([new Promise((r) => proc.once('exit', r)), sleep(30_000)]);
    await media.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

function isWarning(line: string): boolean {
  try {
    return ((JSON.parse(line) as { level?: number }).level ?? 0) >= 40;
  } catch {
    return /\b(WARN|ERROR|FATAL)\b/.test(line);
  }
}

async function waitBanner(output: () => string, exitCode: number | null): Promise<{ baseUrl: string; devKey: string; kubeconfig: string }> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    const text = output();
    const field = (re: RegExp) => re.exec(text)?.[1];
    const baseUrl = field(/base URL:\s+(\S+)/);
    const devKey = field(/dev API key:\s+(\S+)/);
    const kubeconfig = field(/kubeconfig:\s+(\S+)/);
    if (baseUrl && devKey && kubeconfig) return { baseUrl, devKey, kubeconfig };
    if (exitCode !== null || Date.now() > deadline) throw new Error(`local mode did not start:\n${text.slice(-3000)}`);
    await sleep(200);
  }
}
