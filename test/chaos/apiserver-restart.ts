// Fault scenario (issue 16, item 3): the local cluster's API server
// restarted with its state kept (LocalCluster.restartApiServer: every
// connection and watch dropped, the port closed for a few seconds, then a
// fresh watch cache, so an informer resuming from before gets 410 and must
// relist) while jobs are downloading. Runner pods run on through it, as
// under a real kube-apiserver restart, and report to an API server that is
// not there for a while. Jobs posted after the restart show the operator's
// informers and the materializer came back.
import { eventually } from '../../local-cluster/test/support.js';
import { jobProcesses } from '../support/job-processes.js';
import type { ChaosFixture } from './fixture.js';
import { allTerminal, look, postJobs, type Seen } from './outside.js';

export interface ApiServerRestartOptions {
  /** Jobs posted before the restart, and after it. */
  before: number;
  after: number;
  /** How long the API server is down. */
  downMs: number;
  /** How long the jobs may take to end, and then their webhooks to arrive. */
  deadlineMs: number;
}

export interface ApiServerRestartRun {
  ids: string[];
  /** Jobs with a runner process running when the API server went down. */
  runningAtRestart: number;
  /** The API server back to every job terminal. */
  msToAllTerminal: number;
  /** Jobs posted after the restart: POST to their leaving Pending (the informers and materializer back at work), at the poll's resolution. */
  msToStart: number[];
  seen: Seen;
}

/** The source trickles out over this long, so runners are mid-download when the API server goes. */
const DOWNLOAD_SECONDS = 4;

export async function runApiServerRestart({ svc, media, receiver }: ChaosFixture, opts: ApiServerRestartOptions): Promise<ApiServerRestartRun> {
  const url = media.slowUrl(DOWNLOAD_SECONDS);
  const ids = await postJobs(svc, url, receiver.url, opts.before);
  // Mid-run: some runner downloading (its process and the downloader's).
  await eventually(() => ids.some((id) => jobProcesses(id).length >= 2), opts.deadlineMs, 100);
  const runningAtRestart = ids.filter((id) => jobProcesses(id).length > 0).length;
  await svc.cluster.cluster.restartApiServer(opts.downMs);
  const t0 = performance.now();
  const later = await postJobs(svc, url, receiver.url, opts.after);
  const posted = performance.now();
  ids.push(...later);

  const started = new Map<string, number>();
  await allTerminal(svc, ids, opts.deadlineMs, (now) => {
    for (const id of later) if (now.get(id)?.status !== 'Pending' && !started.has(id)) started.set(id, performance.now() - posted);
  });
  const msToAllTerminal = performance.now() - t0;
  const terminalEvent = (id: string) => receiver.hooks.some((h) => h.body.job_id === id && h.body.type !== 'job_processing');
  await eventually(() => ids.every(terminalEvent), opts.deadlineMs, 250).catch(() => undefined); // a missing one is a breach, reported by look
  return { ids, runningAtRestart, msToAllTerminal, msToStart: [...started.values()], seen: await look(svc, receiver, ids) };
}
