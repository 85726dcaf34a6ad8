// Fault scenario (issue 16, item 3): a runner killed mid-download as the
// node would kill it. `sigkill`: its container's main process SIGKILLed
// from outside, with no report from the runner (exit 137: what a cgroup
// kill, a `kill -9` or a hard eviction look like); `oom`: the kubelet's OOM
// kill (reason OOMKilled). ADR 0018 classifies the first `evicted`, the
// second `oom_killed`, and tries both again after RETRY_BACKOFF_SECONDS.
// The source trickles out over a few seconds, so the kill lands while the
// runner is downloading.
import { readFileSync } from 'node:fs';
import { eventually } from '../../local-cluster/test/support.js';
import { jobProcesses } from '../support/job-processes.js';
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
