// The one place a MediaJob is built from a job's normalised options, used by
// the operator's materializer for a row the gateway accepted
// (../db/materialize.ts) and by the batch controller for episode jobs; and
// the MediaBatch of a batch.
import { API_VERSION, type BatchKind, type BatchOptions, type Destination, type MediaBatch, type MediaJob, type MediaJobOptions, type Owned } from './types.js';

/**
 * The owning key's organization, on MediaJobs and MediaBatches the service
 * builds: fair admission caps running jobs per organization by it
 * (operator/src/admission.ts). Absent: the key counts alone.
 */
export const ORGANIZATION_LABEL = 'mediajobs.io/organization-id';

/** The labels of an object owned by a key (and its organization, when it has one). */
function ownerLabels(apiKeyId: string, organizationId: string | null | undefined): Record<string, string> {
  return { 'mediajobs.io/api-key-id': apiKeyId, ...(organizationId ? { [ORGANIZATION_LABEL]: organizationId } : {}) };
}

export interface BuildMediaJobInput {
  jobId: string;
  apiKeyId: string;
  organizationId?: string | null;
  namespace: string;
  options: MediaJobOptions;
  destination?: Destination;
  batchId?: string;
}

/**
 * Held by every unfinished MediaJob, so a delete is recorded in Postgres as
 * CancelledByAdmin before the object goes; the operator removes it once the
 * job has finished or the delete is recorded (operator/src/cancellation.ts,
 * docs/adr/0013-cancellation.md).
 */
export const CANCEL_ON_DELETE_FINALIZER = 'mediajobs.io/cancel-on-delete';

export function buildMediaJob(i: BuildMediaJobInput): Owned<MediaJob> {
  return {
    apiVersion: API_VERSION,
    kind: 'MediaJob',
    metadata: {
      name: i.jobId,
      namespace: i.namespace,
      labels: { ...ownerLabels(i.apiKeyId, i.organizationId), ...(i.batchId ? { 'mediajobs.io/batch-id': i.batchId } : {}) },
      // Set at creation, not on the operator's first pass: a delete in between would otherwise leave the row Pending for ever.
      finalizers: [CANCEL_ON_DELETE_FINALIZER],
    },
    spec: {
      ...i.options,
      jobId: i.jobId,
      owner: { apiKeyId: i.apiKeyId },
      destination: i.destination ?? { type: 'managed' },
      ...(i.batchId ? { batchId: i.batchId } : {}),
    },
  };
}

export interface BuildMediaBatchInput {
  batchId: string;
  apiKeyId: string;
  organizationId?: string | null;
  namespace: string;
  kind: BatchKind;
  showUrl: string;
  folder?: string;
  /** Shows only: a playlist batch is never paused. */
  paused: boolean;
  /** The normalised options every episode shares (url, filename and folder are left out). */
  options: BatchOptions;
  destination?: Destination;
}

/**
 * The MediaBatch of a batch the gateway accepted: name = batch id. The
 * episodes and the webhook URL are not in it: the episode list lives in
 * Postgres (hundreds of long show notes would not fit an object) and the
 * webhook URL is a secret, sealed in the batch row only. The operator's batch
 * controller reads both from the row.
 */
export function buildMediaBatch(i: BuildMediaBatchInput): MediaBatch {
  const { url: _u, filename: _f, folder: _d, ...options } = i.options as BatchOptions & { url?: unknown; filename?: unknown; folder?: unknown };
  return {
    apiVersion: API_VERSION,
    kind: 'MediaBatch',
    metadata: {
      name: i.batchId,
      namespace: i.namespace,
      labels: ownerLabels(i.apiKeyId, i.organizationId),
    },
    spec: {
      batchId: i.batchId,
      showUrl: i.showUrl,
      kind: i.kind,
      owner: { apiKeyId: i.apiKeyId },
      ...(i.folder !== undefined && { folder: i.folder }),
      paused: i.kind === 'show' && i.paused,
      destination: i.destination ?? { type: 'managed' },
      options,
    },
  };
}
