// The one place a MediaJob is built from a job's normalised options, used by
// the gateway when a job is accepted and by the operator's sweeper when a
// job row never got its custom resource.
import { API_VERSION, type Destination, type MediaJob, type MediaJobOptions } from './types.js';

export interface BuildMediaJobInput {
  jobId: string;
  apiKeyId: string;
  namespace: string;
  options: MediaJobOptions;
  destination?: Destination;
  batchId?: string;
}

export function buildMediaJob(i: BuildMediaJobInput): MediaJob {
  return {
    apiVersion: API_VERSION,
    kind: 'MediaJob',
    metadata: {
      name: i.jobId,
      namespace: i.namespace,
      labels: { 'mediajobs.io/api-key-id': i.apiKeyId, ...(i.batchId ? { 'mediajobs.io/batch-id': i.batchId } : {}) },
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
