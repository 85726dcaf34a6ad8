// Creating the MediaJob custom resource of a new job. The row in Postgres
// is the source of truth; if this create fails the job stays Pending and the
// operator's sweeper creates the resource later, so a submit error never
// fails the request.

import * as k8s from '@kubernetes/client-node';
import { keepAliveTransport, makeKubeClient } from '@mediajobs/lib/kube-client';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions, type MediaJobSpec } from '@mediajobs/lib/mediajob/types';

export interface JobSubmitter {
  /** Create the MediaJob named `id`; resolves when it exists (AlreadyExists counts as success). */
  submit(spec: MediaJobSpec, id: string): Promise<void>;
}

/**
 * The resource for a spec, through lib's one MediaJob builder (shared with
 * the operator's sweeper, so a job re-submitted from its row is identical).
 */
export function mediaJobManifest(spec: MediaJobSpec, name: string, namespace: string): MediaJob {
  // The gateway only submits normalised specs; a spec without these two was
  // not normalised, and re-deriving them here would be guessing.
  if (spec.format === undefined || spec.audioBitrate === undefined) throw new Error('MediaJob spec is not normalised (format/audioBitrate missing)');
  const options: MediaJobOptions = { ...spec, format: spec.format, audioBitrate: spec.audioBitrate };
  return buildMediaJob({
    jobId: name, apiKeyId: spec.owner.apiKeyId, namespace, options, destination: spec.destination,
    ...(spec.batchId !== undefined && { batchId: spec.batchId }),
  });
}

export interface KubeSubmitterOptions {
  namespace: string;
  /** Keep-alive sockets to the API server. */
  maxSockets?: number;
  /** Abort a create with no response for this long (the sweeper takes over). */
  timeoutMs?: number;
}

export class KubeJobSubmitter implements JobSubmitter {
  private readonly api: k8s.CustomObjectsApi;

  constructor(kc: k8s.KubeConfig, private readonly opts: KubeSubmitterOptions) {
    // The sweeper takes over a create that times out, so the timeout can be short.
    this.api = makeKubeClient(kc, k8s.CustomObjectsApi, keepAliveTransport({ maxSockets: opts.maxSockets, timeoutMs: opts.timeoutMs ?? 10_000 }));
  }

  static fromKubeconfig(path: string | undefined, opts: KubeSubmitterOptions): KubeJobSubmitter {
    const kc = new k8s.KubeConfig();
    if (path) kc.loadFromFile(path);
    else kc.loadFromDefault();
    return new KubeJobSubmitter(kc, opts);
  }

  async submit(spec: MediaJobSpec, id: string): Promise<void> {
    const body = mediaJobManifest(spec, id, this.opts.namespace);
    try {
      await this.api.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.opts.namespace, plural: MEDIAJOB_PLURAL, body });
    } catch (err) {
      if (err instanceof k8s.ApiException && err.code === 409) return; // AlreadyExists: a retry of the same job
      throw err;
    }
  }
}
