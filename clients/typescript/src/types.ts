// The API's shapes under their own names, all from the generated
// ./generated/openapi.ts (never written by hand), plus the few the SDK adds:
// the terminal statuses and the progress a waiter reports.
import type { components, operations } from './generated/openapi.js';

type Schemas = components['schemas'];

export type CreateJobRequest = Schemas['CreateJobRequest'];
export type BulkJobsRequest = Schemas['BulkJobsRequest'];
export type RenameEpisodesRequest = Schemas['RenameEpisodesRequest'];
export type ChatSettingsRequest = Schemas['ChatSettingsRequest'];
export type Job = Schemas['Job'];
export type JobSummary = Schemas['JobSummary'];
export type JobList = Schemas['JobList'];
export type JobCreated = Schemas['JobCreated'];
export type ShowBatchCreated = Schemas['ShowBatchCreated'];
export type PlaylistBatchCreated = Schemas['PlaylistBatchCreated'];
/** What POST /jobs answers: one job, or a batch for a show or playlist URL. */
export type Created = JobCreated | ShowBatchCreated | PlaylistBatchCreated;
export type BulkJobsCreated = Schemas['BulkJobsCreated'];
export type Batch = Schemas['Batch'];
export type BatchStarted = Schemas['BatchStarted'];
export type BatchCancelled = Schemas['BatchCancelled'];
export type EpisodesRenamed = Schemas['EpisodesRenamed'];
export type Usage = Schemas['Usage'];
export type Metadata = Schemas['Metadata'];
export type ShortClassification = Schemas['ShortClassification'];
export type ChatSettings = Schemas['ChatSettings'];
export type ChatSettingsSaved = Schemas['ChatSettingsSaved'];
export type ChatSettingsRemoved = Schemas['ChatSettingsRemoved'];
export type WebhookSecret = Schemas['WebhookSecret'];
export type WebhookSecretCreated = Schemas['WebhookSecretCreated'];
export type WebhookDeliveries = Schemas['WebhookDeliveries'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type ErrorBody = Schemas['Error'];
/** An error answer as problem details (what the SDK asks for): the contract's `error` and every field of ErrorBody, with `code`. */
export type ProblemDetails = Schemas['ProblemDetails'];
/** One problem of a request: a code of docs/errors.md, the field at fault, the words. */
export type Problem = Schemas['Problem'];
export type ErrorCode = Schemas['ErrorCode'];
/** A body field the API does not know, named in a 201's `warnings`. */
export type FieldWarning = Schemas['FieldWarning'];

/** GET /jobs' query. */
export type ListJobsQuery = NonNullable<operations['listJobs']['parameters']['query']>;
export type JobStatus = Job['status'];
/** The lower-case statuses GET /jobs filters on. */
export type JobStatusFilter = NonNullable<ListJobsQuery['status']>;

/** A webhook delivery's body, by its `type`. */
export type WebhookEvent =
  | Schemas['JobProcessingEvent'] | Schemas['JobCompletedEvent'] | Schemas['JobFailedEvent'] | Schemas['JobSkippedEvent']
  | Schemas['JobCancelledEvent'] | Schemas['ProgressEvent'] | Schemas['BatchCompletedEvent'];

/** Statuses a job never leaves. */
export const TERMINAL_STATUSES: readonly JobStatus[] = ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin'];

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}
