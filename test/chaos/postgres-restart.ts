// Fault scenario (issue 16, item 3): Postgres stopped and started again
// (same port, same data, as a restart or a failover to a synchronous
// replica looks to a client) while jobs download. Runners go on: they report
// to the API server, not to Postgres; the operator's mirror, outbox and
// materializer, and the gateway, lose every connection. While it is down the
// gateway is asked POST /jobs and GET /jobs/{id} over and over: every
// answer must be a JSON 503 with Retry-After, never a 500. Jobs posted after
// it is back show the gateway and the operator recovered without a restart.
import type { PostgresServer } from '../support/postgres-server.js';
import { eventually } from '../../local-cluster/test/support.js';
import { jobProcesses } from '../support/job-processes.js';
import type { ChaosFixture } from './fixture.js';
import { allTerminal, look, postJobs, type ChaosService, type Seen } from './outside.js';

export interface PostgresRestartOptions {
  /** Jobs posted before the restart, and after it. */
  before: number;
  after: number;
  /** How long Postgres is down. */
  downMs: number;
  /** How long the jobs may take to end, and then their webhooks to arrive. */
  deadlineMs: number;
}

export interface PostgresRestartRun {
  ids: string[];
  /** Jobs with a runner process running when Postgres went down. */
  runningAtStop: number;
  /** Answers the gateway gave while Postgres was down, by status, and how many of them lacked Retry-After or a JSON {error}. */
  outageAnswers: Record<string, number>;
  malformedOutageAnswers: string[];
  /** Postgres back to the gateway's first 201. */
  msToFirstAccept: number;
  /** Postgres back to every job terminal. */
  msToAllTerminal: number;
  seen: Seen;
}

/** The source trickles out over this long, so runners are mid-download when Postgres goes. */
const DOWNLOAD_SECONDS = 4;

/** One request as a client sends it, judged: its status, and what is wrong with a 503 (no Retry-After, not {error}). */
async function probe(svc: ChaosService, method: 'POST' | 'GET', path: string, body?: unknown): Promise<{ status: number; wrong?: string }> {
  const res = await fetch(`${svc.gateway.url}${path}`, {
    method, headers: { 'x-api-key': svc.apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 503) return { status: res.status };
  let error: unknown;
  try {
    error = (JSON.parse(text) as { error?: unknown }).error;
  } catch {
    error = undefined;
  }
  const wrong = typeof error !== 'string' ? `${method} ${path}: 503 without a JSON {error}: ${text.slice(0, 100)}`
    : !res.headers.get('retry-after') ? `${method} ${path}: 503 without Retry-After` : undefined;
  return { status: 503, wrong };
}

export async function runPostgresRestart(
  { svc, media, receiver }: ChaosFixture, postgres: PostgresServer, opts: PostgresRestartOptions,
): Promise<PostgresRestartRun> {
  const url = media.slowUrl(DOWNLOAD_SECONDS);
  const ids = await postJobs(svc, url, receiver.url, opts.before);
  await eventually(() => ids.some((id) => jobProcesses(id).length >= 2), opts.deadlineMs, 100);
  const runningAtStop = ids.filter((id) => jobProcesses(id).length > 0).length;

  await postgres.stop();
  const outageAnswers: Record<string, number> = {};
  const malformedOutageAnswers: string[] = [];
  const until = performance.now() + opts.downMs;
  while (performance.now() < until) {
    const answers = await Promise.all([
      probe(svc, 'POST', '/jobs', { url, webhook_url: receiver.url }),
      probe(svc, 'GET', `/jobs/${ids[0]}`),
      probe(svc, 'GET', '/jobs'),
    ]);
    for (const a of answers) {
      outageAnswers[a.status] = (outageAnswers[a.status] ?? 0) + 1;
      if (a.wrong) malformedOutageAnswers.push(a.wrong);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await postgres.start();
  const t0 = performance.now();
  // The gateway's pool finds Postgres again on its own: the first POST that is accepted, retried as a client would.
  const first = await eventually(async () => {
    const r = await svc.api('POST', '/jobs', { url, webhook_url: receiver.url });
    return r.status === 201 ? (r.body.job_id as string) : undefined;
  }, opts.deadlineMs, 100);
  const msToFirstAccept = performance.now() - t0;
  ids.push(first, ...(await postJobs(svc, url, receiver.url, opts.after - 1)));

  await allTerminal(svc, ids, opts.deadlineMs);
  const msToAllTerminal = performance.now() - t0;
  const terminalEvent = (id: string) => receiver.hooks.some((h) => h.body.job_id === id && h.body.type !== 'job_processing');
  await eventually(() => ids.every(terminalEvent), opts.deadlineMs, 250).catch(() => undefined); // a missing one is a breach, reported by look
  return { ids, runningAtStop, outageAnswers, malformedOutageAnswers, msToFirstAccept, msToAllTerminal, seen: await look(svc, receiver, ids) };
}
