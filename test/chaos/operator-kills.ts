// Fault scenario (issue 16, item 3): the operator SIGKILLed every few
// seconds and started again, as a crash-looping pod would be, while short
// jobs run. Jobs are short on purpose (a 3 s MP4 copied to managed
// storage), so the kills land on every stage: materializing, creating
// runner Jobs, mirroring status, settling storage, delivering webhooks.
// The killer stops once every job is terminal (or after `maxKills`); an
// operator is left running so the webhooks still owed go out.
//
// Each operator is killed `killEveryMs` after it took the Lease, not after
// its start: on a loaded 2-core machine a new process takes seconds to
// boot and the Lease of the one killed must expire first, so a kill on a
// fixed clock could land before any operator ever led and the run would
// prove nothing (it was tried: 200 jobs, 5 s, load 50: no progress).
import { eventually } from '../../local-cluster/test/support.js';
import type { ChaosFixture } from './fixture.js';
import { TERMINAL, leaseHolder, look, statuses, type Seen } from './outside.js';

export interface OperatorKillsOptions {
  jobs: number;
  killEveryMs: number;
  /** Stop killing after this many kills (the reduced scenario); default: until every job is terminal. */
  maxKills?: number;
  /** How long every job may take to end, and then every terminal webhook to arrive. */
  deadlineMs: number;
}

export interface OperatorKillsRun {
  ids: string[];
  kills: number;
  /** Kills that found a job not yet terminal (the ones that mattered). */
  killsMidRun: number;
  /** POST of the first job to the last job terminal, as GET /jobs/{id} shows it. */
  msToAllTerminal: number;
  /** Last terminal status to every terminal webhook received. */
  msToAllWebhooks: number;
  /** Each operator's start to its holding the Lease. */
  msToLead: number[];
  seen: Seen;
}

export async function runOperatorKills({ svc, media, receiver }: ChaosFixture, opts: OperatorKillsOptions): Promise<OperatorKillsRun> {
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < opts.jobs; i += 20) {
    const batch = await Promise.all(Array.from({ length: Math.min(20, opts.jobs - i) }, () =>
      svc.api('POST', '/jobs', { url: media.mp4Url, webhook_url: receiver.url })));
    for (const r of batch) {
      if (r.status !== 201) throw new Error(`POST /jobs answered ${r.status} ${JSON.stringify(r.body)}`);
      ids.push(r.body.job_id as string);
    }
  }

  let allTerminal = false;
  let kills = 0;
  let killsMidRun = 0;
  const msToLead: number[] = [];
  const killer = (async () => {
    while (!allTerminal && kills < (opts.maxKills ?? Infinity)) {
      const started = performance.now();
      const name = svc.operator.name;
      await eventually(async () => allTerminal || (await leaseHolder(svc)) === name, opts.deadlineMs, 100);
      if (allTerminal) break;
      msToLead.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, opts.killEveryMs));
      if (allTerminal) break;
      await svc.operator.kill('SIGKILL');
      kills += 1;
      svc.operator.start();
    }
  })();

  const pending = new Set(ids);
  await eventually(async () => {
    const now = await statuses(svc, [...pending]);
    for (const [id, row] of now) if (TERMINAL.includes(row.status as string)) pending.delete(id);
    // A kill counts as mid-run when it came before the last job ended.
    if (pending.size) killsMidRun = kills;
    return pending.size === 0;
  }, opts.deadlineMs, 500);
  const msToAllTerminal = performance.now() - t0;
  allTerminal = true;
  await killer;
  svc.operator.start();

  const tWebhooks = performance.now();
  const terminalEvent = (id: string) => receiver.hooks.some((h) => h.body.job_id === id && h.body.type !== 'job_processing');
  await eventually(() => ids.every(terminalEvent), opts.deadlineMs, 250).catch(() => undefined); // a missing one is a breach, reported by look
  const msToAllWebhooks = performance.now() - tWebhooks;
  return { ids, kills, killsMidRun, msToAllTerminal, msToAllWebhooks, msToLead, seen: await look(svc, receiver, ids) };
}
