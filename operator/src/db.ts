// Compatibility shim (issue 12): the jobs table is lib/src/db/jobs.ts's and
// the outbox lib/src/db/outbox.ts's. OperatorDb binds their functions to one
// pool for code not yet calling them directly; no SQL lives here.
import type pg from 'pg';
import {
  findJob, insertFromManifest, strandedPending, syncStatus, type JobRow, type StrandedJob,
} from '@mediajobs/lib/db/jobs';
import type { OutboxEvent } from '@mediajobs/lib/db/outbox';
import type { MediaJob, MediaJobStatus } from '@mediajobs/lib/mediajob/types';

export type { JobRow } from '@mediajobs/lib/db/jobs';
export { eventId, type OutboxEvent } from '@mediajobs/lib/db/outbox';

export class OperatorDb {
  constructor(private readonly pool: pg.Pool) {}

  findJob(id: string): Promise<JobRow | undefined> {
    return findJob(this.pool, id);
  }

  insertFromManifest(id: string, mj: MediaJob, webhookUrlSealed: string | null): Promise<boolean> {
    return insertFromManifest(this.pool, id, mj, webhookUrlSealed);
  }

  syncStatus(jobId: string, s: MediaJobStatus, eventsFor: (oldStatus: string, row: JobRow) => OutboxEvent[]): Promise<string | undefined> {
    return syncStatus(this.pool, jobId, s, eventsFor);
  }

  strandedPending(olderThanSeconds: number, limit = 200): Promise<StrandedJob[]> {
    return strandedPending(this.pool, olderThanSeconds, limit);
  }
}
