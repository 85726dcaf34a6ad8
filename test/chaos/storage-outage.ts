// Fault scenario (issue 16, item 3): managed storage (S3, here s3rver)
// stops while the runners' parts are on their way, and comes back some
// seconds later. Each job fails its attempt as storage_unreachable and is
// tried again per ADR 0018 (retried: it ends Completed on a later attempt;
// out of attempts: Failed, storage_unreachable); nothing is delivered
// anywhere else; every multipart upload begun is completed or aborted, none
// left to be billed; every file in the bucket is one a Completed job
// delivered. The S3 front paces UploadPart bodies so the outage reliably
// lands on parts in flight, and cuts every connection when it stops.
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { eventually } from '../../local-cluster/test/support.js';
import { startS3rver, type RunningS3rver } from '../support/s3rver.js';
import { s3rverWithAbort, type S3rverWithAbort } from '../support/s3rver-abort.js';
import { startChaos, type ChaosFixture } from './fixture.js';
import { allTerminal, breaches, look, postJobs, type Seen } from './outside.js';

export const BUCKET = 'managed';
/**
 * UploadPart bytes per second through the front: the 3 s test MP4 (~90 KB)
 * takes about ten seconds, so every job's part is still on its way when the
 * last job's upload begins (20 runners begin theirs over about 8 s here).
 */
const PART_PACE = 8_000;
const OBJECT_SUFFIX = '._S3rver_object';

export interface StorageChaos {
  f: ChaosFixture;
  s3: RunningS3rver;
  front: S3rverWithAbort;
  /** The storage only (front and s3rver), for a caller that stops the service itself. */
  stopStorage(): Promise<void>;
  stop(): Promise<void>;
}

/** The chaos fixture with managed storage on s3rver, reached through the pacing, stoppable front; `jobs` run at once. */
export async function startStorageChaos(jobs: number): Promise<StorageChaos> {
  const s3 = await startS3rver({ buckets: [BUCKET] });
  const front = await s3rverWithAbort(s3, { partBytesPerSecond: PART_PACE });
  const f = await startChaos({ MAX_RUNNING_JOBS: String(jobs) }, undefined, {
    MANAGED_STORAGE: 's3', MANAGED_S3_ENDPOINT: front.endpoint, MANAGED_S3_BUCKET: BUCKET,
    MANAGED_S3_ACCESS_KEY: s3.accessKeyId, MANAGED_S3_SECRET_KEY: s3.secretAccessKey, MANAGED_S3_FORCE_PATH_STYLE: 'true',
  }).catch(async (err: unknown) => {
    await front.close();
    await s3.stop();
    throw err;
  });
  const stopStorage = async () => {
    await front.close();
    await s3.stop();
  };
  return {
    f, s3, front, stopStorage,
    async stop() {
      await f.stop();
      await stopStorage();
    },
  };
}

/** The keys of the objects in the bucket, read from s3rver's own files (not through the front, which may be down). */
function bucketKeys(s3: RunningS3rver): string[] {
  const root = join(s3.directory, BUCKET);
  return readdirSync(root, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(OBJECT_SUFFIX))
    .map((e) => relative(root, join(e.parentPath, e.name)).slice(0, -OBJECT_SUFFIX.length))
    .filter((k) => !k.startsWith('._S3rver_uploads'));
}

export interface StorageOutageRun {
  ids: string[];
  /** Multipart uploads begun and unfinished when the storage stopped. */
  uploadsAtStop: number;
  /** Storage back to every job terminal. */
  msToAllTerminal: number;
  /** Storage back to no multipart upload left. */
  msToNoUploads: number;
  /** Unfinished multipart uploads once every job ended (none is the rule). */
  uploadsLeft: number;
  seen: Seen;
  /** Outcomes by status (and reason for the failed). */
  outcomes: Record<string, number>;
  breaches: string[];
}

export async function runStorageOutage(c: StorageChaos, o: { jobs: number; downMs: number; deadlineMs: number }): Promise<StorageOutageRun> {
  const { f, front, s3 } = c;
  const ids = await postJobs(f.svc, f.media.mp4Url, f.receiver.url, o.jobs);
  // Every job's upload begun and a part on its way; then the storage goes.
  await eventually(async () => (await front.pendingUploads(BUCKET)).length >= o.jobs, 120_000, 50).catch(async () => {
    throw new Error(`only ${(await front.pendingUploads(BUCKET)).length} of ${o.jobs} uploads were in flight at once: slow PART_PACE down`);
  });
  const uploadsAtStop = (await front.pendingUploads(BUCKET)).length;
  await front.pause();
  await new Promise((r) => setTimeout(r, o.downMs));
  await front.resume();
  const back = performance.now();
  await allTerminal(f.svc, ids, o.deadlineMs);
  const msToAllTerminal = performance.now() - back;
  // An abort that met the outage is retried until the storage answers (lib/src/storage/parts.ts abortPatiently).
  await eventually(async () => (await front.pendingUploads(BUCKET)).length === 0, 60_000, 100).catch(() => undefined);
  const msToNoUploads = performance.now() - back;
  const uploadsLeft = (await front.pendingUploads(BUCKET)).length;
  await eventually(() => ids.every((id) => f.receiver.hooks.some((h) => h.body.job_id === id && h.body.type !== 'job_processing')), 60_000, 100)
    .catch(() => undefined);
  const seen = await look(f.svc, f.receiver, ids, bucketKeys(s3));
  const outcomes: Record<string, number> = {};
  for (const j of seen.jobs) {
    const label = j.status === 'Failed' ? `Failed ${j.reason}` : j.status;
    outcomes[label] = (outcomes[label] ?? 0) + 1;
  }
  return { ids, uploadsAtStop, msToAllTerminal, msToNoUploads, uploadsLeft, seen, outcomes, breaches: judge(seen, uploadsLeft) };
}

/**
 * The scenario's rules: the fault suite's usual ones (breaches()), each job
 * ending Completed or Failed; a failure is storage_unreachable and leaves no
 * file, a completion came on a later attempt; no multipart upload left.
 */
function judge(seen: Seen, uploadsLeft: number): string[] {
  const out = breaches(seen, { status: ['Completed', 'Failed'], created: seen.jobs.length });
  for (const j of seen.jobs) {
    if (j.status === 'Failed' && j.reason !== 'storage_unreachable') out.push(`${j.id}: Failed ${j.reason}, not storage_unreachable`);
    if (j.status === 'Failed' && j.s3Key) out.push(`${j.id}: Failed with a file (${j.s3Key})`);
    if (j.status === 'Completed' && (j.attempt ?? 1) < 2) out.push(`${j.id}: Completed on attempt 1, though the storage stopped under its upload`);
  }
  if (uploadsLeft) out.push(`storage: ${uploadsLeft} multipart upload(s) neither completed nor aborted`);
  return out;
}
