// POST /jobs/{id}/cancel and POST /batch/{id}/cancel (docs/adr/0013). The
// cancellation is one conditional write of the jobs rows (lib/src/db/jobs.ts
// cancelJob, lib/src/db/batches.ts cancelBatch) with its job_cancelled
// events and the operator's notice in the same transaction; the operator
// then stops the runners. Answers only: the SQL is the tables' owners'.
import { Router, type RequestHandler, type Response } from 'express';
import { cancelBatch, getBatch } from '@mediajobs/lib/db/batches';
import { cancelJob, getJob } from '@mediajobs/lib/db/jobs';
import type { Logger } from '@mediajobs/lib/logger';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import type { Principal } from '../auth.js';
import { HttpError, failsWith } from '../http-errors.js';
import { isUuid } from '../ids.js';
import { optionalJsonBody } from '../json-body.js';
import { NOT_FOUND as BATCH_NOT_FOUND, NOT_OWNER as BATCH_NOT_OWNER, batchResponse } from './batches.js';
import { jobResponse } from './jobs.js';
import type { GatewayMetrics } from '../metrics.js';

export interface CancelRouteDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  /** A 24 h download URL for a managed-storage key (the answer is GET /jobs/{id}'s). */
  presign: (key: string) => Promise<string>;
  /** Counts the jobs cancelled (metrics.ts). */
  metrics?: GatewayMetrics;
}

export const JOB_NOT_FOUND = 'Job not found';

/** The 409 of a job or batch that ended before the request. */
export const alreadyFinished = (what: 'Job' | 'Batch', status: string) => `${what} is already finished (status: ${status})`;

function principal(res: Response): Principal {
  return res.locals.principal!;
}

export function cancelRouter(deps: CancelRouteDeps): Router {
  const router = Router();
  const noBody = optionalJsonBody();
  router.post('/jobs/:id/cancel', noBody, failsWith('Failed to cancel job'), cancelOneJob(deps));
  router.post('/batch/:id/cancel', noBody, failsWith('Failed to cancel batch'), cancelWholeBatch(deps));
  return router;
}

/** 200 with the job as GET /jobs/{id} shows it, now Cancelled; 409 when it ended first; 404 for another key's or an unknown job. */
function cancelOneJob(deps: CancelRouteDeps): RequestHandler {
  return async (req, res) => {
    const raw = String(req.params.id);
    if (!isUuid(raw)) throw new HttpError(404, JOB_NOT_FOUND);
    const id = raw.toLowerCase();
    const { apiKeyId } = principal(res);
    const r = await cancelJob(deps.pool, id, 'Cancelled', apiKeyId);
    if (r.outcome === 'not_found') throw new HttpError(404, JOB_NOT_FOUND);
    if (r.outcome === 'finished') throw new HttpError(409, alreadyFinished('Job', r.status));
    deps.logger.debug({ jobId: id, previous: r.previous }, 'cancel recorded');
    deps.metrics?.jobsCancelled();
    const job = await getJob(deps.pool, apiKeyId, id);
    if (!job) throw new HttpError(404, JOB_NOT_FOUND);
    res.json(await jobResponse(job, deps, deps.logger));
  };
}

/**
 * 200 with the batch as GET /batch/{id} shows it (now finished) and
 * `cancelled_jobs`, the ids of the episodes this request cancelled. The
 * batch errors of the other batch endpoints (404, 401), and 409 for a
 * batch already completed or finished.
 */
function cancelWholeBatch(deps: CancelRouteDeps): RequestHandler {
  return async (req, res) => {
    const raw = String(req.params.id);
    if (!isUuid(raw)) throw new HttpError(404, BATCH_NOT_FOUND);
    const id = raw.toLowerCase();
    const r = await cancelBatch(deps.pool, id, principal(res).apiKeyId);
    if (r.outcome === 'not_found') throw new HttpError(404, BATCH_NOT_FOUND);
    if (r.outcome === 'not_owner') throw new HttpError(401, BATCH_NOT_OWNER);
    if (r.outcome === 'finished') throw new HttpError(409, alreadyFinished('Batch', r.status));
    deps.logger.info({ batchId: id, cancelled: r.cancelledJobs.length }, 'batch cancelled');
    deps.metrics?.jobsCancelled(r.cancelledJobs.length);
    const batch = await getBatch(deps.pool, id);
    if (!batch) throw new HttpError(404, BATCH_NOT_FOUND);
    res.json({ ...batchResponse(batch), cancelled_jobs: r.cancelledJobs });
  };
}
