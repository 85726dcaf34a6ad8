// Fault scenario (issue 16, item 3): a runner killed mid-download as the
// node would kill it. `sigkill`: its container's main process SIGKILLed
// from outside, with no report from the runner (exit 137: what a cgroup
// kill, a `kill -9` or a hard eviction look like); `oom`: the kubelet's OOM
// kill (reason OOMKilled). ADR 0018 classifies the first `evicted`, the
// second `oom_killed`, and tries both again after RETRY_BACKOFF_SECONDS.
// The source trickles out over a few seconds, so the kill lands while the
// runner is downloading.
//
// `after-upload` (runKillAfterUpload): OOM-killed after it stored the media,
// before its report, the one moment a runner holds a file nobody was told
// of. Its next attempt must not find that file in its way (a `-<suffix>`
// name beside an orphan): the operator deletes what the failed attempt
// recorded in status.storedFiles (docs/adr/0018).
import { readFileSync } from 'node:fs';
import { eventually } from '../../local-cluster/test/support.js';
import { jobProcesses } from '../support/job-processes.js';
import type { PagesServerOptions } from '../support/media-pages.js';
import type { ChaosFixture } from './fixture.js';
import { TERMINAL } from './outside.js';

export type RunnerKill = 'sigkill' | 'oom';

/** The category ADR 0018 gives each kind of kill. */
export const CATEGORY: Record<RunnerKill, string> = { sigkill: 'evicted', oom: 'oom_killed' };

/** Seconds the source takes to send the file: long enough to be killed in, short enough to retry. */
const DOWNLOAD_SECONDS = 6;

export interface RunnerKillRun {
  id: string;
  /** The kill to the job terminal (GET /jobs/{id}). */
  msToTerminal: number;
}

/** The pid of a job's container main process: the leader of its process group (the kubelet starts each container in its own). */
function mainProcess(id: string): number | undefined {
  return jobProcesses(id).find((pid) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    return pgid === pid;
  });
}

export async function runRunnerKill({ svc, media, receiver }: ChaosFixture, how: RunnerKill): Promise<RunnerKillRun> {
  const created = await svc.api('POST', '/jobs', { url: media.slowUrl(DOWNLOAD_SECONDS), webhook_url: receiver.url });
  if (created.status !== 201) throw new Error(`POST /jobs answered ${created.status} ${JSON.stringify(created.body)}`);
  const id = created.body.job_id as string;
  // Downloading: the runner and the downloader it started are running.
  await eventually(() => jobProcesses(id).length >= 2, 120_000, 100);
  const t0 = performance.now();
  if (how === 'sigkill') {
    process.kill(await eventually(() => mainProcess(id), 10_000, 50), 'SIGKILL');
  } else {
    const pod = await eventually(async () => (await svc.cluster.kubectl(['get', 'pods', '-l', `mediajobs.io/mediajob=${id}`, '-o', 'jsonpath={.items[0].metadata.name}'])).stdout.trim());
    if (!svc.cluster.cluster.kubelet.oomKill('default', pod)) throw new Error(`pod ${pod} of job ${id} is not running`);
  }
  await eventually(async () => TERMINAL.includes((await svc.api('GET', `/jobs/${id}`)).body.status as string), 120_000, 200);
  const msToTerminal = performance.now() - t0;
  // Its terminal webhook, before anyone judges; a missing one is a breach, reported by look.
  await eventually(() => receiver.hooks.some((h) => h.body.job_id === id && h.body.type !== 'job_processing'), 60_000, 100).catch(() => undefined);
  return { id, msToTerminal };
}

/**
 * The subtitle track of the test pages, held back: the runner fetches
 * sidecars only once the media is stored, so while its request is held the
 * runner sits between its upload and its report. `asked` resolves at the
 * first request; after `withhold()` that one and every later one get a 404
 * (a sidecar that cannot be fetched is left out, and the job completes with
 * the media alone).
 */
export class HeldSubtitles {
  private ask!: () => void;
  private refuse!: (err: Error) => void;
  private withheld = false;
  readonly asked = new Promise<void>((r) => (this.ask = r));
  private readonly held = new Promise<void>((_, reject) => (this.refuse = reject));

  constructor() {
    this.held.catch(() => undefined);
  }

  readonly before: NonNullable<PagesServerOptions['before']> = (path) => {
    if (!path.endsWith('.vtt')) return Promise.resolve();
    if (this.withheld) return Promise.reject(new Error('withheld'));
    this.ask();
    return this.held;
  };

  withhold(): void {
    this.withheld = true;
    this.refuse(new Error('withheld'));
  }
}

export interface KillAfterUploadRun extends RunnerKillRun {
  /** The key attempt 1 stored before it was killed, as its MediaJob's status.storedFiles named it. */
  storedByFirst: string;
}

/**
 * One job of `pageUrl` (a page with a subtitle track) with download_subtitles
 * and a filename, OOM-killed once its MediaJob records the stored media and
 * the runner asks for the held track. One at a time: `held` is the only track.
 */
export async function runKillAfterUpload({ svc, receiver }: ChaosFixture, pageUrl: string, held: HeldSubtitles, filename: string): Promise<KillAfterUploadRun> {
  const created = await svc.api('POST', '/jobs', { url: pageUrl, download_subtitles: true, filename, webhook_url: receiver.url });
  if (created.status !== 201) throw new Error(`POST /jobs answered ${created.status} ${JSON.stringify(created.body)}`);
  const id = created.body.job_id as string;
  await held.asked;
  const storedByFirst = await eventually(async () => {
    const mj = JSON.parse((await svc.cluster.kubectl(['get', 'mediajob', id, '-o', 'json'])).stdout) as { status?: { storedFiles?: Record<string, number> } };
    return Object.keys(mj.status?.storedFiles ?? {}).find((k) => k.endsWith('.mp4'));
  }, 30_000, 50);
  const pod = (await svc.cluster.kubectl(['get', 'pods', '-l', `mediajobs.io/mediajob=${id}`, '-o', 'jsonpath={.items[0].metadata.name}'])).stdout.trim();
  const t0 = performance.now();
  if (!svc.cluster.cluster.kubelet.oomKill('default', pod)) throw new Error(`pod ${pod} of job ${id} is not running`);
  held.withhold();
  await eventually(async () => TERMINAL.includes((await svc.api('GET', `/jobs/${id}`)).body.status as string), 120_000, 200);
  const msToTerminal = performance.now() - t0;
  await eventually(() => receiver.hooks.some((h) => h.body.job_id === id && h.body.type !== 'job_processing'), 60_000, 100).catch(() => undefined);
  return { id, msToTerminal, storedByFirst };
}
