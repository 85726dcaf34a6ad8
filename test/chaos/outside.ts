// What the fault scenarios look at, all from outside the service: the jobs
// through the API, the MediaJobs, runner Jobs and pods through kubectl, the
// webhooks the receiver got, the files in managed storage, GET /usage. And
// the one pure judgement over them (breaches), shared by the tests in
// `make test` and the figures of `make chaos`, so both hold the service to
// the same rules.
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { clusterFetch, eventually } from '../../local-cluster/test/support.js';
import type { OperatorProcess, Receiver, Service } from '../e2e/support.js';

export const TERMINAL = ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin'];

export type ChaosService = Service<OperatorProcess>;

/** One job as the outside sees it once everything settled. */
export interface JobSeen {
  id: string;
  status: string;
  /** GET /jobs/{id}'s reason (a failure's category); absent when it has none. */
  reason?: string;
  s3Key: string | null;
  fileSize: number | null;
  /** status.attempt of its MediaJob (absent: 1); undefined when the MediaJob is not there. */
  attempt: number | undefined;
  /** Outcomes of status.attempts[], oldest first. */
  attempts: { attempt: number; outcome: string; category?: string }[];
  /** The mediajobs.io/attempt label of every runner Job of the MediaJob, with how many pods each Job has. */
  runnerJobs: { name: string; attempt: number; pods: number }[];
  /** Deliveries of its terminal event (job_completed, job_failed ...): the webhook-id of each. */
  terminalDeliveries: string[];
  /** Terminal event types delivered for it (one expected). */
  terminalTypes: string[];
}

export interface Seen {
  jobs: JobSeen[];
  /** Keys of the files in managed storage under the test key's prefix. */
  storedKeys: string[];
  usage: Record<string, unknown>;
}

const TERMINAL_EVENTS = new Set(['job_completed', 'job_failed', 'job_warning', 'job_skipped', 'job_cancelled']);

/** POST /jobs `n` times at once for `url`, with a webhook; the ids, or a throw at the first answer that is not 201. */
export async function postJobs(svc: ChaosService, url: string, webhookUrl: string, n: number): Promise<string[]> {
  const created = await Promise.all(Array.from({ length: n }, () => svc.api('POST', '/jobs', { url, webhook_url: webhookUrl })));
  return created.map((r) => {
    if (r.status !== 201) throw new Error(`POST /jobs answered ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.job_id as string;
  });
}

/** Statuses of `ids` by GET /jobs/{id}, a few requests at a time. */
export async function statuses(svc: ChaosService, ids: string[]): Promise<Map<string, Record<string, unknown>>> {
  const out = new Map<string, Record<string, unknown>>();
  for (let i = 0; i < ids.length; i += 20) {
    await Promise.all(ids.slice(i, i + 20).map(async (id) => out.set(id, (await svc.api('GET', `/jobs/${id}`)).body)));
  }
  return out;
}

/**
 * Wait until every job of `ids` is terminal. When the deadline passes, the
 * error names the jobs still open with their status, and the operator's
 * last warnings, so a failure in CI says where to look.
 */
export async function allTerminal(svc: ChaosService, ids: string[], deadlineMs: number, onPoll?: (now: Map<string, Record<string, unknown>>) => void): Promise<void> {
  let open: string[] = [];
  await eventually(async () => {
    const now = await statuses(svc, ids);
    onPoll?.(now);
    open = [...now].filter(([, j]) => !TERMINAL.includes(j.status as string)).map(([id, j]) => `${id} ${String(j.status)}`);
    return open.length === 0;
  }, deadlineMs, 250).catch((err: Error) => {
    const warnings = svc.operator.output().split('\n').filter((l) => /"level":(4|5)\d/.test(l)).slice(-20);
    throw new Error(`${err.message}; still open: ${open.join(', ')}\n${whereToLook(svc)}; its last ${warnings.length} warnings:\n${warnings.join('\n')}`);
  });
}

/** The operator processes' output so far, saved to a file a failed run names. */
export function whereToLook(svc: ChaosService): string {
  const saved = join(mkdtempSync(join(tmpdir(), 'chaos-')), 'operator.log');
  writeFileSync(saved, svc.operator.output());
  return `operator output: ${saved}`;
}

/** What a breach report needs beside the breaches: each job's outcome and attempts, and where the operator's output is. */
export function runSummary(svc: ChaosService, seen: Seen): string {
  const jobs = seen.jobs.map((j) => ({ id: j.id, status: j.status, s3Key: j.s3Key, attempts: j.attempts, runnerJobs: j.runnerJobs.map((r) => r.name) }));
  return `${whereToLook(svc)}\njobs: ${JSON.stringify(jobs)}\nstored: ${JSON.stringify(seen.storedKeys)}`;
}

/** Who holds the operator's Lease now, as the API server says (kube's own record of leadership). */
export async function leaseHolder(svc: ChaosService): Promise<string | undefined> {
  const ns = svc.env.MEDIAJOBS_NAMESPACE ?? 'default';
  const res = await clusterFetch(svc.cluster.cluster, `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${svc.env.LEASE_NAME ?? 'mediajobs-operator'}`);
  if (res.status !== 200) return undefined;
  return ((await res.json()) as { spec?: { holderIdentity?: string } }).spec?.holderIdentity;
}

interface KubeList<T> { items: T[] }
interface Meta { name: string; labels?: Record<string, string> }
interface MediaJobObject { metadata: Meta; status?: { attempt?: number; attempts?: { attempt: number; outcome: string; category?: string }[] } }

async function kubectlList<T>(svc: ChaosService, what: string, selector?: string): Promise<T[]> {
  const r = await svc.cluster.kubectl(['get', what, ...(selector ? ['-l', selector] : []), '-o', 'json']);
  return (JSON.parse(r.stdout) as KubeList<T>).items;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(join(e.parentPath, e.name));
  }
  return out;
}

/**
 * Everything the breaches are judged on, read once the jobs are terminal and
 * their webhooks in. `stored`: the keys in managed storage when it is not
 * the local directory (a bucket); default, the files under the test key's prefix there.
 */
export async function look(svc: ChaosService, receiver: Receiver, ids: string[], stored?: string[]): Promise<Seen> {
  const rows = await statuses(svc, ids);
  const mediaJobs = new Map((await kubectlList<MediaJobObject>(svc, 'mediajobs')).map((m) => [m.metadata.name, m]));
  const runnerJobs = await kubectlList<{ metadata: Meta }>(svc, 'jobs', 'mediajobs.io/mediajob');
  const pods = await kubectlList<{ metadata: Meta }>(svc, 'pods', 'mediajobs.io/mediajob');
  const podsOf = new Map<string, number>();
  for (const p of pods) {
    const job = p.metadata.labels?.['batch.kubernetes.io/job-name'] ?? '';
    podsOf.set(job, (podsOf.get(job) ?? 0) + 1);
  }
  const jobs = ids.map((id): JobSeen => {
    const row = rows.get(id)!;
    const mj = mediaJobs.get(id);
    const hooks = receiver.hooks.filter((h) => h.body.job_id === id && TERMINAL_EVENTS.has(h.body.type as string));
    return {
      id,
      status: row.status as string,
      ...(typeof row.reason === 'string' && { reason: row.reason }),
      s3Key: (row.s3_key as string | null) ?? null,
      fileSize: (row.file_size as number | null) ?? null,
      attempt: mj ? (mj.status?.attempt ?? 1) : undefined,
      attempts: mj?.status?.attempts ?? [],
      runnerJobs: runnerJobs.filter((j) => j.metadata.labels?.['mediajobs.io/mediajob'] === id).map((j) => ({
        name: j.metadata.name, attempt: Number(j.metadata.labels?.['mediajobs.io/attempt']), pods: podsOf.get(j.metadata.name) ?? 0,
      })),
      terminalDeliveries: hooks.map((h) => h.webhookId ?? ''),
      terminalTypes: [...new Set(hooks.map((h) => h.body.type as string))],
    };
  });
  const root = svc.env.MANAGED_STORAGE_DIR!;
  const storedKeys = stored ?? filesUnder(join(root, svc.managedPrefix)).map((f) => relative(root, f));
  const usage = (await svc.api('GET', '/usage')).body;
  return { jobs, storedKeys, usage };
}

export interface Expectation {
  /** The status every job must end with, or the statuses any may end with. */
  status: string | readonly string[];
  /** Jobs created by the scenario (usage_count must be exactly this). */
  created: number;
}

/**
 * Every rule the fault suite holds the service to, as a list of breaches
 * (empty: all held): each job ended as expected, each attempt ran in one
 * runner Job with one pod and no attempt twice, each terminal event reached
 * the webhook with one stable webhook-id and no second terminal event,
 * storage holds exactly the delivered files, and usage counts are exact.
 */
export function breaches(seen: Seen, expect: Expectation): string[] {
  const out: string[] = [];
  for (const j of seen.jobs) {
    const allowed = [expect.status].flat();
    if (!allowed.includes(j.status)) out.push(`${j.id}: ended ${j.status}, not ${allowed.join(' or ')}`);
    if (j.attempt === undefined) {
      out.push(`${j.id}: no MediaJob`);
    } else {
      const labels = j.runnerJobs.map((r) => r.attempt).sort((a, b) => a - b);
      const wanted = Array.from({ length: j.attempt }, (_, i) => i + 1);
      if (labels.join() !== wanted.join()) out.push(`${j.id}: runner Jobs for attempts [${labels.join()}], attempt ${j.attempt} needs [${wanted.join()}]`);
      const recorded = j.attempts.map((a) => a.attempt);
      if (new Set(recorded).size !== recorded.length) out.push(`${j.id}: status.attempts records an attempt twice: [${recorded.join()}]`);
    }
    for (const r of j.runnerJobs) if (r.pods !== 1) out.push(`${j.id}: runner Job ${r.name} has ${r.pods} pods`);
    const ids = new Set(j.terminalDeliveries);
    if (ids.size === 0) out.push(`${j.id}: terminal webhook never delivered`);
    if (ids.size > 1) out.push(`${j.id}: terminal webhook delivered under ${ids.size} webhook-ids`);
    if (ids.has('')) out.push(`${j.id}: terminal webhook without webhook-id`);
    if (j.terminalTypes.length > 1) out.push(`${j.id}: terminal webhooks of ${j.terminalTypes.join(' and ')}`);
  }
  const delivered = seen.jobs.flatMap((j) => (j.s3Key ? [j.s3Key] : [])).sort();
  const stored = [...seen.storedKeys].sort();
  if (delivered.join('\n') !== stored.join('\n')) {
    const extra = stored.filter((k) => !delivered.includes(k));
    const missing = delivered.filter((k) => !stored.includes(k));
    out.push(`storage: ${extra.length} file(s) no job delivered${extra.length ? ` (${extra.slice(0, 3).join(', ')})` : ''}, ${missing.length} delivered key(s) missing`);
  }
  const usage = seen.usage;
  if (usage.usage_count !== expect.created) out.push(`usage: usage_count ${String(usage.usage_count)}, ${expect.created} jobs created`);
  // storage_usage_gb is bytes / 2^30, exact in a JSON number (api-gateway/src/routes/usage.ts).
  const bytes = seen.jobs.reduce((s, j) => s + (j.fileSize ?? 0), 0);
  const counted = Math.round(Number(usage.storage_usage_gb) * 2 ** 30);
  if (counted !== bytes) out.push(`usage: storage_usage_gb is ${counted} bytes, the delivered files ${bytes}`);
  if (usage.storage_reserved_gb !== 0) out.push(`usage: storage_reserved_gb ${String(usage.storage_reserved_gb)} with every job ended`);
  return out;
}
