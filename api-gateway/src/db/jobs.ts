// The jobs table is lib/src/db/jobs.ts's. Until issue 12's shims go, the
// gateway's routes import it from here; what stays after them is the one
// line that builds POST /jobs' insert with rule 9 (storage_destinations,
// ../destinations/store.ts) inside it.
import { jobInserter } from '@mediajobs/lib/db/jobs';
import { resolveByProviderSql, resolveDefaultSql } from '../destinations/store.js';

export {
  COUNTER_SHARDS, GET_JOB, LIST_JOBS, LIST_JOBS_BY_STATUS, TOTAL_JOBS, getJob, listJobs,
  type JobDetail, type JobSummary, type NewJob,
} from '@mediajobs/lib/db/jobs';

/** Write a new Pending job (see jobInserter). */
export const insertJob = jobInserter({ byDefault: resolveDefaultSql, byProvider: resolveByProviderSql });
