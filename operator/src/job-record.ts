// A MediaJob's record in Postgres (the API's read model, ADR 0002): jobs
// applied with kubectl are recorded for the key their spec names, every
// status the operator settles on is mirrored into the row with the webhook
// events it announces (webhook-events.ts builds them, lib/src/db/jobs.ts
// writes both in one transaction), and a completed job's download URLs are
// signed for its job_completed webhook. Owns the per-MediaJob memory of what is recorded
// and what was last mirrored; the status itself is status.ts's.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { canonicalJson } from '@mediajobs/lib/canonical-json';
import { normaliseSpecOptions } from '@mediajobs/lib/job-options';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { PermanentError } from '@mediajobs/lib/reconcile';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import { jobIdOf, type JobStatus, type MediaJob, type MediaJobResult, type MediaJobStatus, type Owned } from '@mediajobs/lib/mediajob/types';
import { findFinishedManifest, findJob, insertFromManifest, mirrorStatus, type FinishedJob, type JobRow, type MirroredColumns } from '@mediajobs/lib/db/jobs';
import { isCancelStatus } from '@mediajobs/lib/job-cancellation';
import { JobDestinations, type DownloadUrls } from './destinations.js';
import type { OperatorMetrics } from './metrics.js';
import { transitionEvents } from './webhook-events.js';

/** What the operator needs from managed storage. */
export interface ManagedStorageAccess {
  /** Presigned download URL (24 h) of a delivered object. */
  presign(key: string): Promise<string>;
  /** The destination document the runner of job `jobId`, owned by API key `apiKeyId`, gets in its credentials Secret (ADR 0012). */
  destination(jobId: string, apiKeyId: string): Record<string, unknown>;
}

/** A kubectl-applied MediaJob whose spec.owner.apiKeyId is not an active key: it fails, and is never run. */
export const INVALID_OWNER = { reason: 'invalid_owner', message: 'spec.owner.apiKeyId does not name an active API key' } as const;
/** A manifest whose spec.jobId names another MediaJob's record: it fails, and that record is left alone. */
export const JOB_ID_TAKEN = { reason: 'job_id_taken', message: 'spec.jobId names the record of another MediaJob' } as const;

export interface JobRecordDeps {
  pool: pg.Pool;
  box: SecretBox;
  storage: ManagedStorageAccess;
  destinations: JobDestinations;
  log: Logger;
  /** Counts kubectl-applied jobs recorded, and the row's transitions (started, finished). */
  metrics?: Pick<OperatorMetrics, 'jobAccepted' | 'jobMoved'>;
}

/**
 * A kubectl-applied MediaJob with the gateway's defaults and corrections
 * (format, audio bitrate and codec rules the CRD cannot express); gateway
 * specs (with jobId) are normalised already.
 */
export function withDefaults<T extends MediaJob>(mj: T): T {
  if (mj.spec.jobId) return mj;
  return { ...mj, spec: { ...mj.spec, ...normaliseSpecOptions(mj.spec) } };
}

/** sha256 of a manifest MediaJob's spec as the API server stored it (defaults applied), whatever its keys' order. */
export function manifestFingerprint(mj: Pick<MediaJob, 'spec'>): Buffer {
  return createHash('sha256').update(canonicalJson(mj.spec)).digest();
}

/**
 * What a status mirror would make of the row, as far as the API shows it:
 * two equal fingerprints write the same status, step, progress, error,
 * reason, file, cause line and download figures. expectedBytes is the
 * runner's (the row keeps only the reservation made of it), so a row read
 * back has none; the download figures are compared as the runner wrote
 * them, so a row read back has none either (the next figures are written).
 */
function mirrorFingerprint(
  jobId: string,
  s: Pick<MediaJobStatus, 'status' | 'step' | 'progress' | 'error' | 'reason' | 'expectedBytes' | 'errorDetail' | 'download'> & { storageKey?: string | null },
): string {
  return JSON.stringify([
    jobId, s.status, s.step, s.progress, s.error ?? null, s.reason ?? null, s.storageKey ?? null, s.expectedBytes ?? null,
    s.errorDetail ?? null, s.download ?? null,
  ]);
}

/** Whether the row belongs to this MediaJob; rows from before MediaJobs were recorded by name trust the id. */
function recordedFor(row: JobRow, mj: MediaJob): boolean {
  if (row.cr_namespace === null || row.cr_name === null) return true;
  return row.cr_namespace === mj.metadata.namespace && row.cr_name === mj.metadata.name;
}

export class JobRecord {
  /**
   * Per MediaJob key, the job id known to be in Postgres, and what was last
   * mirrored there (to skip no-op writes). Keyed by MediaJob, so both are
   * dropped when it goes, and a long-running operator holds only live jobs.
   */
  private readonly recorded = new Map<string, string>();
  private readonly synced = new Map<string, string>();

  constructor(private readonly d: JobRecordDeps) {
  }

  /**
   * Make sure Postgres has the job: gateway-made jobs already do; kubectl
   * manifests are recorded here, with their spec's fingerprint. A new
   * manifest MediaJob whose namespace, name and spec match a finished
   * record (the same manifest applied again after its MediaJob went) is not
   * recorded: that record is returned, for the caller to restore instead of
   * running it again (docs/gitops.md). Throws PermanentError (INVALID_OWNER)
   * when the owner key the manifest names does not exist or is revoked,
   * and (JOB_ID_TAKEN) when spec.jobId names a record kept for another
   * MediaJob: a manifest could otherwise write another job's status and
   * webhooks.
   */
  async ensureRecorded(key: string, mj: Owned<MediaJob>): Promise<FinishedJob | undefined> {
    const jobId = jobIdOf(mj);
    if (this.recorded.get(key) === jobId) return undefined;
    const row = await findJob(this.d.pool, jobId);
    if (row && !recordedFor(row, mj)) throw new PermanentError(JOB_ID_TAKEN.reason, JOB_ID_TAKEN.message);
    if (row) {
      this.remember(key, jobId, row);
      return undefined;
    }
    const fingerprint = manifestFingerprint(mj);
    if (!mj.status?.status) {
      const earlier = await findFinishedManifest(this.d.pool, mj.metadata.namespace!, mj.metadata.name!, fingerprint);
      if (earlier) return earlier;
    }
    const webhook = mj.spec.webhookUrl ? this.d.box.sealable(mj.spec.webhookUrl) : null;
    if (!(await insertFromManifest(this.d.pool, jobId, withDefaults(mj), webhook, fingerprint))) {
      throw new PermanentError(INVALID_OWNER.reason, INVALID_OWNER.message);
    }
    this.d.metrics?.jobAccepted();
    this.recorded.set(key, jobId);
    return undefined;
  }

  /**
   * The row this MediaJob already has (a job the gateway accepted), made
   * the one sync() writes, without recording one: for a job that fails
   * before it is recorded (an invalid spec), so its row ends with it. A
   * row kept for another MediaJob is left alone, as is a manifest's that
   * has none (nothing is recorded of it).
   */
  async attachExisting(key: string, mj: MediaJob): Promise<void> {
    const jobId = jobIdOf(mj);
    if (this.recorded.get(key) === jobId) return;
    const row = await findJob(this.d.pool, jobId);
    if (row && recordedFor(row, mj)) this.remember(key, jobId, row);
  }

  /**
   * The row is this MediaJob's, and what it holds is mirrored already: the
   * first pass over a job the gateway just accepted (Pending, Queued, 0)
   * writes nothing, and neither does one after an operator restart.
   */
  private remember(key: string, jobId: string, row: JobRow & MirroredColumns): void {
    this.synced.set(key, mirrorFingerprint(jobId, {
      status: row.status as JobStatus, step: row.step as MediaJobStatus['step'], progress: row.progress,
      error: row.error ?? undefined, reason: row.reason ?? undefined, storageKey: row.s3_key,
    }));
    this.recorded.set(key, jobId);
  }

  /**
   * Mirror status into Postgres; the first write of each transition also
   * queues its webhooks. Returns the row's status when the row had ended
   * already with another one (a cancellation that won the race, ADR 0013):
   * then nothing was written, and the caller follows the row.
   */
  async sync(key: string, mj: MediaJob, s: MediaJobStatus): Promise<JobStatus | undefined> {
    const jobId = jobIdOf(mj);
    // Only the row this MediaJob was recorded as (a job refused before that, its owner or its id, has none of its own).
    if (this.recorded.get(key) !== jobId) return undefined;
    const fingerprint = mirrorFingerprint(jobId, { ...s, storageKey: s.result?.storageKey });
    if (this.synced.get(key) === fingerprint || !s.status) return undefined;
    // Completed is signed only if it is going to be recorded: a cancelled row refuses it anyway.
    if (s.status === 'Completed') {
      const row = await findJob(this.d.pool, jobId);
      if (row && isCancelStatus(row.status)) return row.status;
    }
    const urls = s.status === 'Completed' ? await this.presignResult(mj, s.result) : {};
    const m = await mirrorStatus(this.d.pool, jobId, s, (old, r) => transitionEvents(old, s, r, mj, urls));
    this.synced.set(key, fingerprint);
    // Once per transition: only the write that found the row at its old status moves it.
    if (m?.updated && m.previous !== m.current) this.d.metrics?.jobMoved(m.previous, s);
    return m && !m.updated && m.current !== s.status ? (m.current as JobStatus) : undefined;
  }

  /** The MediaJob went: forget what was known about it. */
  forget(key: string): void {
    this.recorded.delete(key);
    this.synced.delete(key);
  }

  /**
   * Download URLs of a completed job's files, signed where they were
   * delivered: managed storage, or the job's own destination (which also
   * seals them into the row for GET /jobs/{id}). A URL that cannot be signed
   * is left out: the webhook then carries null (spec), and GET /jobs/{id}
   * signs managed files again.
   */
  private async presignResult(mj: MediaJob, result: MediaJobResult | undefined): Promise<DownloadUrls> {
    const unsigned = (err: unknown) => {
      this.d.log.warn({ jobId: jobIdOf(mj), err: errFields(err) }, 'presigning a result URL failed');
      return undefined;
    };
    if (!JobDestinations.isManaged(mj)) {
      try {
        return await this.d.destinations.presignOwn(mj, result);
      } catch (err) {
        unsigned(err);
        return {};
      }
    }
    const sign = async (key: string | undefined) => (key ? this.d.storage.presign(key).catch(unsigned) : undefined);
    return { s3Url: await sign(result?.storageKey), subtitleUrl: await sign(result?.subtitleKey), thumbnailUrl: await sign(result?.thumbnailKey) };
  }
}
