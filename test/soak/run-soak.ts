// One soak run (issue 16 item 6, issue 34 item 3): the gateway, the operator
// and the local cluster, each in its own process as in production, under a
// load that comes in bursts with idle gaps between them; what it measures:
// how every job ended, each process's memory, the LISTs the local cluster
// answered per kind (its /metrics, apiserver_request_total{verb="LIST"}),
// and the warning lines the three processes logged while idle.
//
// The load of a burst, per second (`rate` jobs): POST /jobs of a job that
// completes (70%), fails and is not retried (10%), fails once and is retried
// (10%), or runs until it is cancelled through POST /jobs/{id}/cancel (10%);
// half with a webhook_url to a receiver here; every job polled with
// GET /jobs/{id} until it ends; GET /jobs and GET /usage once a second. The
// runner is operator/test/support/scripted-runner.ts (a real pod process
// speaking the runner protocol, without yt-dlp and ffmpeg). Finished Jobs and
// MediaJobs are deleted after 5 s and 30 s, Events a minute after their last
// write, so the cluster holds a steady number of objects.
//
// The timers are compressed (`timers`): the informers' watchdog, periodic
// relist and resync in seconds, bookmarks every `bookmarkMs`, and idle gaps
// of several watchdog periods: what a real operator meets in weeks (watches
// going quiet, relists, resyncs) happens here in minutes.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import {
  BENCH_ADMIN_URL, root, serviceEnv, sleep, start, startCluster, startGateway, withScratch,
} from '../../api-gateway/bench/support.js';
import { tsxCommand } from '../support/tsx.js';
import { clusterListCounts } from '../support/cluster-metrics.js';

export interface SoakTimers {
  /** The operator's WATCHDOG_SECONDS, RELIST_SECONDS and RESYNC_SECONDS. */
  watchdogSeconds: number;
  relistSeconds: number;
  resyncSeconds: number;
  /** How often the local cluster sends a watch a bookmark. */
  bookmarkMs: number;
}

export interface SoakOptions {
  /**
   * Seconds of load, then of quiet, in each cycle; cycles follow each other until the run's end. The quiet
   * starts when the burst's jobs have all ended (their polling is load too): the wait for them, up to
   * MAX_DRAIN_SECONDS, is not counted in the cycle, so a loaded machine gets the same quiet, later.
   */
  burstSeconds: number;
  idleSeconds: number;
  /** Memory is compared from the end of the warm-up on; the run is warmUpSeconds + seconds of cycles, plus the waits for bursts' jobs to end. */
  warmUpSeconds: number;
  seconds: number;
  /** Jobs submitted per second of a burst. */
  rate: number;
  timers: SoakTimers;
  /** LOCAL_CLUSTER_WATCH_FAULTS for the cluster, past the bookmark interval (e.g. "drop=0.01,expire=0.1"). */
  watchFaults?: string;
  keepLogs?: boolean;
  /** A progress line, about once a minute. */
  progress?: (line: string) => void;
}

export type ProcessName = 'gateway' | 'operator' | 'local cluster';

export interface SoakResult {
  seconds: number;
  accepted: number;
  ended: number;
  stillRunning: number;
  webhooks: number;
  /** Resident memory in MB, after the warm-up, at the end, and the peak. */
  memory: Record<ProcessName, { warm: number; end: number; peak: number }>;
  /** Answers no client should get: any 5xx, and 4xx other than a cancel's 409 race with the job's end. */
  errors: Record<string, number>;
  /** Jobs that ended otherwise than their script says. */
  wrongEnd: Record<string, number>;
  /** LISTs the cluster answered per resource ("mediajobs.mediajobs.io", "pods"), over the whole run and while idle. */
  lists: Record<string, number>;
  idleLists: Record<string, number>;
  idleSeconds: number;
  /** The longest wait from a burst's end until its jobs had all ended. */
  longestDrainSeconds: number;
  /** Warning lines (and worse) of the three processes, over the whole run and while idle: "process: message". */
  warnings: string[];
  idleWarnings: string[];
}

const IMAGE = 'mediajobs/runner:soak';
/** The longest a cycle waits for its burst's jobs to end before its quiet gap runs anyway (then without an idle window). */
const MAX_DRAIN_SECONDS = 120;
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

/** A window of quiet: from its start to its end (ms), and the LIST counts at both ends. */
interface IdleWindow {
  from: number;
  to: number;
  listsAtStart: Record<string, number>;
  listsAtEnd: Record<string, number>;
}

export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  return withScratch({ adminUrl: BENCH_ADMIN_URL, poolMax: 4, workPrefix: 'mj-soak-', keepWork: o.keepLogs }, async ({ dbUrl, pool, work }) => {
    const imageMap = join(work, 'images.json');
    writeFileSync(imageMap, JSON.stringify({ [IMAGE]: tsxCommand(join(root, 'operator/test/support/scripted-runner.ts')) }));
    const faults = [`bookmarkMs=${o.timers.bookmarkMs}`, ...(o.watchFaults ? [o.watchFaults] : [])].join(',');
    const cluster = await startCluster(work, ['mediajob.yaml', 'mediabatch.yaml'], {
      args: ['--image-map', imageMap, '--event-ttl-seconds', '60'], env: { LOCAL_CLUSTER_WATCH_FAULTS: faults },
    });
    const env = {
      ...serviceEnv(dbUrl, cluster.kubeconfig, work), RUNNER_IMAGE: IMAGE, MAX_RUNNING_JOBS: '20',
      JOB_TTL_SECONDS_AFTER_FINISHED: '5', FINISHED_MEDIAJOB_TTL_SECONDS: '30',
      RETRY_BACKOFF_SECONDS: '1', RETRY_PLATFORM_BACKOFF_SECONDS: '1', RETRY_MAX_BACKOFF_SECONDS: '2',
      WEBHOOK_BACKOFF_MS: '200', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', LOG_LEVEL: 'warn',
      WATCHDOG_SECONDS: String(o.timers.watchdogSeconds), RELIST_SECONDS: String(o.timers.relistSeconds),
      RESYNC_SECONDS: String(o.timers.resyncSeconds),
    };
    const gateway = await startGateway(env, work);
    const operator = await start(join(root, 'operator/src/main.ts'), /operator started/, join(work, 'operator.log'), { env: { ...env, LOG_LEVEL: 'info' } });
    const { key } = await createApiKey(pool, { name: 'soak' });
    const logs: Record<ProcessName, string> = {
      gateway: join(work, 'gateway.log'), operator: join(work, 'operator.log'), 'local cluster': join(work, 'local-cluster.log'),
    };

    let webhooks = 0;
    const receiver = createServer((req, res) => {
      req.resume().on('end', () => {
        webhooks++;
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    const errors = new Map<string, number>();
    const wrongEnd = new Map<string, number>();
    let accepted = 0;
    let ended = 0;
    const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${gateway.url}${path}`, {
        method, headers: { 'x-api-key': key, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const json = (await r.json()) as Record<string, unknown>;
      const route = path.replace(/[0-9a-f-]{36}/, '{id}').replace(/\?.*/, '');
      if (r.status >= 500 || (r.status >= 400 && !(route.endsWith('/cancel') && r.status === 409))) count(errors, `${method} ${route} ${r.status}`);
      return { status: r.status, body: json };
    };

    /** One job from POST to its end, polled as a client would. */
    const followJob = async (): Promise<void> => {
      const m = pick();
      const posted = await api('POST', '/jobs', { url: m.url, ...(Math.random() < 0.5 && { webhook_url: hook }) });
      if (posted.status !== 201) return;
      accepted++;
      const id = posted.body.job_id as string;
      for (let polls = 0; ; polls++) {
        await sleep(500);
        const got = await api('GET', `/jobs/${id}`);
        const status = got.body.status as string;
        if (m.cancel && status === 'Processing') await api('POST', `/jobs/${id}/cancel`);
        if (TERMINAL.has(status)) {
          ended++;
          if (status !== m.ends) count(wrongEnd, `${m.url} ended ${status}`);
          return;
        }
        if (polls > 600) {
          count(wrongEnd, `${m.url} not ended after 5 minutes`);
          return;
        }
      }
    };

    const processes: Record<ProcessName, number> = { gateway: gateway.proc.pid!, operator: operator.pid!, 'local cluster': cluster.proc.pid! };
    const sample = () => Object.fromEntries(Object.entries(processes).map(([k, pid]) => [k, rssMb(pid)])) as Record<ProcessName, number>;
    const lists = () => clusterListCounts(cluster.kc);
    const inFlight = new Set<Promise<void>>();
    let warm: Record<ProcessName, number> | undefined;
    const peak = sample();
    const idle: IdleWindow[] = [];
    let open: IdleWindow | undefined;
    let idleCycle = -1;
    const listsAtStart = await lists();
    const cycle = o.burstSeconds + o.idleSeconds;
    const total = o.warmUpSeconds + o.seconds;
    const t0 = Date.now();
    // Seconds of the cycles run so far: bursts and quiet gaps, not the waits for a burst's jobs to end.
    let scheduled = 0;
    let drained = 0;
    let longestDrain = 0;
    for (let tick = 0; scheduled < total; tick++) {
      const inBurst = scheduled % cycle < o.burstSeconds;
      const cycleNo = Math.floor(scheduled / cycle);
      // Under load a burst's jobs take longer to end; the quiet gap waits for them rather than overlapping them.
      const draining = !inBurst && !open && idleCycle !== cycleNo && inFlight.size > 0 && drained < MAX_DRAIN_SECONDS;
      drained = draining ? drained + 1 : inBurst ? 0 : drained;
      longestDrain = Math.max(longestDrain, drained);
      if (inBurst) {
        for (let i = 0; i < o.rate; i++) {
          const p = followJob().catch((err: unknown) => void count(errors, `client: ${(err as Error).message}`));
          inFlight.add(p);
          void p.finally(() => inFlight.delete(p));
        }
        void api('GET', '/jobs?limit=100').catch(() => undefined);
        void api('GET', '/usage').catch(() => undefined);
      }
      // An idle window opens once the burst's jobs have all ended and closes with the gap.
      if (!inBurst && !open && idleCycle !== cycleNo && inFlight.size === 0) {
        open = { from: Date.now(), to: 0, listsAtStart: await lists(), listsAtEnd: {} };
        idleCycle = cycleNo;
      }
      if (!draining) scheduled++;
      if (open && (scheduled % cycle < o.burstSeconds || scheduled >= total)) {
        idle.push({ ...open, to: Date.now(), listsAtEnd: await lists() });
        open = undefined;
      }
      const now = sample();
      for (const k of Object.keys(peak) as ProcessName[]) peak[k] = Math.max(peak[k], now[k]);
      if (!warm && Date.now() - t0 >= o.warmUpSeconds * 1000) warm = now;
      if (tick > 0 && tick % 60 === 0) {
        o.progress?.(`${String(tick).padStart(5)} s  RSS MB ${Object.entries(now).map(([k, mb]) => `${k} ${mb.toFixed(0)}`).join(', ')}`);
      }
      await sleep(Math.max(0, t0 + (tick + 1) * 1000 - Date.now()));
    }
    const end = sample();
    const listsAtEnd = await lists();
    await Promise.race([Promise.all(inFlight), sleep(120_000)]);
    receiver.close();

    const inIdle = (t: number) => idle.some((w) => t >= w.from && t <= w.to);
    const warnings = Object.entries(logs).flatMap(([name, file]) => warningLines(name, file));
    const base = warm ?? end;
    return {
      seconds: (Date.now() - t0) / 1000,
      accepted, ended, stillRunning: inFlight.size, webhooks,
      memory: Object.fromEntries((Object.keys(end) as ProcessName[]).map((k) => [k, { warm: base[k], end: end[k], peak: peak[k] }])) as SoakResult['memory'],
      errors: Object.fromEntries(errors), wrongEnd: Object.fromEntries(wrongEnd),
      lists: difference(listsAtEnd, listsAtStart),
      idleLists: sumCounts(idle.map((w) => difference(w.listsAtEnd, w.listsAtStart))),
      idleSeconds: idle.reduce((s, w) => s + (w.to - w.from) / 1000, 0),
      longestDrainSeconds: longestDrain,
      warnings: warnings.map((w) => w.line),
      idleWarnings: warnings.filter((w) => inIdle(w.time)).map((w) => w.line),
    };
  });
}

/** The lines of a process's JSON log at level warn (40) or worse, with their times; lines that are not JSON count as warnings. */
function warningLines(name: string, file: string): { time: number; line: string }[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const found: { time: number; line: string }[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.trim()) continue;
    let entry: { level?: number; time?: number; msg?: string };
    try {
      entry = JSON.parse(raw) as typeof entry;
    } catch {
      if (/warn|error|fatal/i.test(raw)) found.push({ time: Date.now(), line: `${name}: ${raw.slice(0, 300)}` });
      continue;
    }
    if ((entry.level ?? 0) >= 40) found.push({ time: entry.time ?? Date.now(), line: `${name}: ${entry.msg ?? raw.slice(0, 300)}` });
  }
  return found;
}

function difference(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]).filter(([, v]) => (v as number) > 0));
}

function sumCounts(all: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of all) for (const [k, v] of Object.entries(c)) out[k] = (out[k] ?? 0) + v;
  return out;
}
