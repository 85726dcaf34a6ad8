// Soak (issue 16 item 6, `make soak`): a steady mixed load for a bounded
// time against the gateway, the operator and the local cluster, each in its
// own process as in production, and their memory (RSS) after a warm-up and
// at the end. Goal: growth under 10% after warm-up, and no error.
//
// The load, per second (SOAK_RATE jobs): POST /jobs of a job that completes
// (70%), fails and is not retried (10%), fails once and is retried (10%), or
// runs until it is cancelled through POST /jobs/{id}/cancel (10%); half of
// them with a webhook_url to a receiver here; every job polled with
// GET /jobs/{id} until it ends; GET /jobs and GET /usage once a second. The
// runner is operator/test/support/scripted-runner.ts (a real pod process
// speaking the runner protocol, without yt-dlp and ffmpeg, so the machine
// spends its time on the service). Finished Jobs and MediaJobs are deleted
// after 5 s and 30 s (JOB_TTL_SECONDS_AFTER_FINISHED,
// FINISHED_MEDIAJOB_TTL_SECONDS) and Events a minute after their last write
// (the local cluster's --event-ttl-seconds; kube-apiserver's default is an
// hour), so the cluster holds a steady number of objects within the run, as
// a production cluster with its TTLs does at its own scale.
//
//   npx tsx test/soak/soak.ts
//
// SOAK_SECONDS (default 600: measured, after the warm-up), SOAK_WARMUP_SECONDS (420: past the API
// server's 5-minute watch history, which fills for 5 minutes and then holds steady; a 60 s warm-up
// took that filling for growth), SOAK_RATE (1 job/s: 2 saturate a 2-core machine), SOAK_KEEP_LOGS=1 (keep every process log),
// BENCH_DATABASE_ADMIN_URL (postgres://postgres@127.0.0.1:5432/test).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, loadAverage, machine, root, rowPrinter, runBench, serviceEnv, sleep, start, startCluster, startGateway, withScratch,
} from '../../api-gateway/bench/support.js';
import { tsxCommand } from '../support/tsx.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const WARMUP = Number(process.env.SOAK_WARMUP_SECONDS ?? 420);
const RATE = Number(process.env.SOAK_RATE ?? 1);
const IMAGE = 'mediajobs/runner:soak';
const TERMINAL = new Set(['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin']);

/** What each job is, by share of the load: the scripted runner's URL and the status it must end in. */
const MIX: { share: number; url: string; ends: string; cancel?: boolean }[] = [
  { share: 0.7, url: 'http://scripted.invalid/complete?sleepMs=300', ends: 'Completed' },
  { share: 0.1, url: 'http://scripted.invalid/fail?category=processing_failed', ends: 'Failed' },
  { share: 0.1, url: 'http://scripted.invalid/fail?category=connection_error&times=1', ends: 'Completed' },
  { share: 0.1, url: 'http://scripted.invalid/hang', ends: 'Cancelled', cancel: true },
];

function pick(): (typeof MIX)[number] {
  let r = Math.random();
  for (const m of MIX) if ((r -= m.share) < 0) return m;
  return MIX[0]!;
}

/** Resident memory of a process, in MB (Linux /proc). */
function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb ?? NaN) / 1024;
}

interface Tally {
  accepted: number;
  /** Answers no client should get: any 5xx, and 4xx other than a cancel's 409 race with the job's end. */
  errors: Map<string, number>;
  wrongEnd: Map<string, number>;
  ended: number;
}

runBench(async () => {
  const loadAtStart = loadAverage();
  await withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 4, workPrefix: 'mj-soak-', keepWork: process.env.SOAK_KEEP_LOGS === '1' }, async ({ dbUrl, pool, work }) => {
    const imageMap = join(work, 'images.json');
    writeFileSync(imageMap, JSON.stringify({ [IMAGE]: tsxCommand(join(root, 'operator/test/support/scripted-runner.ts')) }));
    const cluster = await startCluster(work, ['mediajob.yaml', 'mediabatch.yaml'], { args: ['--image-map', imageMap, '--event-ttl-seconds', '60'] });
    const env = {
      ...serviceEnv(dbUrl, cluster.kubeconfig, work), RUNNER_IMAGE: IMAGE, MAX_RUNNING_JOBS: '20',
      JOB_TTL_SECONDS_AFTER_FINISHED: '5', FINISHED_MEDIAJOB_TTL_SECONDS: '30',
      RETRY_BACKOFF_SECONDS: '1', RETRY_PLATFORM_BACKOFF_SECONDS: '1', RETRY_MAX_BACKOFF_SECONDS: '2',
      WEBHOOK_BACKOFF_MS: '200', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', LOG_LEVEL: 'warn',
    };
    const gateway = await startGateway(env, work);
    const operator = await start(join(root, 'operator/src/main.ts'), /operator started/, join(work, 'operator.log'), { env: { ...env, LOG_LEVEL: 'info' } });
    const { key } = await createApiKey(pool, { name: 'soak' });

    let webhooks = 0;
    const receiver = createServer((req, res) => {
      req.resume().on('end', () => {
        webhooks++;
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    const tally: Tally = { accepted: 0, errors: new Map(), wrongEnd: new Map(), ended: 0 };
    const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${gateway.url}${path}`, {
        method, headers: { 'x-api-key': key, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const json = (await r.json()) as Record<string, unknown>;
      const route = path.replace(/[0-9a-f-]{36}/, '{id}').replace(/\?.*/, '');
      if (r.status >= 500 || (r.status >= 400 && !(route.endsWith('/cancel') && r.status === 409))) count(tally.errors, `${method} ${route} ${r.status}`);
      return { status: r.status, body: json };
    };

    /** One job from POST to its end, polled as a client would. */
    const followJob = async (): Promise<void> => {
      const m = pick();
      const posted = await api('POST', '/jobs', { url: m.url, ...(Math.random() < 0.5 && { webhook_url: hook }) });
      if (posted.status !== 201) return;
      tally.accepted++;
      const id = posted.body.job_id as string;
      for (let polls = 0; ; polls++) {
        await sleep(500);
        const got = await api('GET', `/jobs/${id}`);
        const status = got.body.status as string;
        if (m.cancel && status === 'Processing') await api('POST', `/jobs/${id}/cancel`);
        if (TERMINAL.has(status)) {
          tally.ended++;
          if (status !== m.ends) count(tally.wrongEnd, `${m.url} ended ${status}`);
          return;
        }
        if (polls > 600) {
          count(tally.wrongEnd, `${m.url} not ended after 5 minutes`);
          return;
        }
      }
    };

    const processes = { gateway: gateway.proc.pid!, operator: operator.pid!, 'local cluster': cluster.proc.pid! };
    const sample = () => Object.fromEntries(Object.entries(processes).map(([k, pid]) => [k, rssMb(pid)])) as Record<keyof typeof processes, number>;
    const inFlight = new Set<Promise<void>>();
    let warm: ReturnType<typeof sample> | undefined;
    const peak = sample();
    const t0 = Date.now();
    process.stdout.write(`soak: ${WARMUP} s warm-up, then ${SECONDS} s measured, at ${RATE} jobs/s...\n`);
    for (let tick = 0; Date.now() - t0 < (WARMUP + SECONDS) * 1000; tick++) {
      for (let i = 0; i < RATE; i++) {
        const p = followJob().catch((err: unknown) => void count(tally.errors, `client: ${(err as Error).message}`));
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p));
      }
      void api('GET', '/jobs?limit=100').catch(() => undefined);
      void api('GET', '/usage').catch(() => undefined);
      const now = sample();
      for (const k of Object.keys(peak) as (keyof typeof processes)[]) peak[k] = Math.max(peak[k], now[k]);
      if (!warm && Date.now() - t0 >= WARMUP * 1000) warm = now;
      // A line a minute: whether memory levels off or keeps climbing shows only over time.
      if (tick > 0 && tick % 60 === 0) {
        process.stdout.write(`  ${String(tick).padStart(5)} s  RSS MB ${Object.entries(now).map(([k, mb]) => `${k} ${mb.toFixed(0)}`).join(', ')}\n`);
      }
      await sleep(Math.max(0, t0 + (tick + 1) * 1000 - Date.now()));
    }
    const end = sample();
    await Promise.race([Promise.all(inFlight), sleep(120_000)]);
    receiver.close();

    const row = rowPrinter(58, 26);
    process.stdout.write(`\nSoak (${machine(loadAtStart)}; ${WARMUP} s warm-up + ${SECONDS} s, ${RATE} jobs/s, scripted runner)\n`);
    row('jobs accepted / ended / still running', `${tally.accepted} / ${tally.ended} / ${inFlight.size}`, 'all end');
    row('webhook deliveries received', String(webhooks));
    for (const k of Object.keys(end) as (keyof typeof processes)[]) {
      const base = warm ?? end;
      const growth = (end[k] - base[k]) / base[k];
      row(`${k} RSS MB after warm-up / end / peak (growth)`, `${base[k].toFixed(0)} / ${end[k].toFixed(0)} / ${peak[k].toFixed(0)} (${(growth * 100).toFixed(1)}%)`, '< 10%');
    }
    row('errors (unexpected answers)', tally.errors.size ? JSON.stringify(Object.fromEntries(tally.errors)) : '0', '0');
    row('jobs that ended otherwise than their script', tally.wrongEnd.size ? JSON.stringify(Object.fromEntries(tally.wrongEnd)) : '0', '0');
  });
});
