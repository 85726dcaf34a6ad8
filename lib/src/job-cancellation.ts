// Cancellation as every part sees it (docs/adr/0013-cancellation.md): the
// two cancelled statuses and who causes each, the job_cancelled webhook
// payload, and the Postgres channel that tells the operator a row was
// cancelled. The row is the truth: whoever writes a terminal status into it
// first wins (lib/src/db/jobs.ts cancelJob and syncStatus both refuse to
// change a terminal row), and the operator follows it by stopping the
// runner. Left to others: the SQL (lib/src/db/jobs.ts, batches.ts), the HTTP
// answers (api-gateway/src/routes/cancel.ts), the stopping
// (operator/src/cancellation.ts), the delivery (the outbox).
import type { JobStatus } from './mediajob/types.js';
import type { OutboxEvent } from './db/outbox.js';

/** Cancelled: by the job's own API key. CancelledByAdmin: admin CLI, spec.cancel, or kubectl delete of an unfinished MediaJob. */
export type CancelStatus = Extract<JobStatus, 'Cancelled' | 'CancelledByAdmin'>;

export const CANCEL_STATUSES: readonly CancelStatus[] = ['Cancelled', 'CancelledByAdmin'];

export function isCancelStatus(s: string | undefined): s is CancelStatus {
  return s === 'Cancelled' || s === 'CancelledByAdmin';
}

/**
 * NOTIFY channel of a committed cancellation; the payload is a
 * CancelNotice as JSON. Sent only for rows whose MediaJob may exist (a
 * cr_name); an episode without one never gets a runner.
 */
export const CANCEL_CHANNEL = 'mediajobs_job_cancelled';

export interface CancelNotice {
  jobId: string;
  namespace: string;
  name: string;
  status: CancelStatus;
}

/** A CancelNotice from a notification payload; undefined for anything malformed. */
export function parseCancelNotice(payload: string | undefined): CancelNotice | undefined {
  try {
    const n = JSON.parse(payload ?? '') as Partial<CancelNotice>;
    if (typeof n.jobId === 'string' && typeof n.namespace === 'string' && typeof n.name === 'string' && isCancelStatus(n.status)) {
      return { jobId: n.jobId, namespace: n.namespace, name: n.name, status: n.status };
    }
  } catch {
    // not JSON
  }
  return undefined;
}

/** Who a cancelled status names in the webhook: the client (its API key) or an administrator. */
export function cancelledBy(status: CancelStatus): 'user' | 'admin' {
  return status === 'Cancelled' ? 'user' : 'admin';
}

/**
 * The job_cancelled event (an addition to the spec's Events): `type`,
 * `job_id`, `status` (`cancelled`), `url`, `cancelled_by` (`user` or
 * `admin`), `message`. No job_failed, and no chat notification (chat is for
 * failed jobs only).
 */
export function jobCancelledEvent(row: { id: string; url: string }, status: CancelStatus): OutboxEvent {
  const by = cancelledBy(status);
  return {
    type: 'job_cancelled',
    payload: {
      type: 'job_cancelled', job_id: row.id, status: 'cancelled', url: row.url, cancelled_by: by,
      message: by === 'user' ? 'The job was cancelled' : 'The job was cancelled by an administrator',
    },
  };
}
