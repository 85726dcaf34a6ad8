// Creating the MediaJob custom resource of a new job. The row in Postgres
// is the source of truth; if this create fails the job stays Pending and the
// operator's sweeper creates the resource later, so a submit error never
// fails the request. The route builds the MediaJob (lib's buildMediaJob, the
// sweeper's builder too, so a job re-submitted from its row is identical) and
// this creates exactly that object. A batch's MediaBatch is created the same
// way (its row is the truth; see submitBatch), and starting a paused batch
// unpauses its MediaBatch.

import * as k8s from '@kubernetes/client-node';
import { MERGE_PATCH, isAlreadyExists, keepAliveTransport, loadKubeConfig, makeKubeClient } from '@mediajobs/lib/kube-client';
import { GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob } from '@mediajobs/lib/mediajob/types';

export interface JobSubmitter {
  /** Create this MediaJob; resolves when it exists (AlreadyExists counts as success). */
  submit(mj: MediaJob): Promise<void>;
}

/**
 * The MediaBatch side (issue 13). The batch row in Postgres is the truth for
 * both calls: a failed create or unpause is logged and the request still
 * succeeds (see the README's "Batches" section for what picks it up).
 */
export interface BatchSubmitter {
  /** Create this MediaBatch; AlreadyExists counts as success. */
  submitBatch(mb: MediaBatch): Promise<void>;
  /** Merge-patch `spec.paused` to false on a started batch's MediaBatch. */
  resumeBatch(namespace: string, name: string): Promise<void>;
}

export function isBatchSubmitter(s: object): s is BatchSubmitter {
  const b = s as Partial<BatchSubmitter>;
  return typeof b.submitBatch === 'function' && typeof b.resumeBatch === 'function';
}

export interface KubeSubmitterOptions {
  /**
   * The namespace the gateway's MediaJobs live in. A MediaJob for another is
   * refused: the job row names this one, and the sweeper would create a
   * second copy there.
   */
  namespace: string;
  /** Keep-alive sockets to the API server. */
  maxSockets?: number;
  /** Abort a create with no response for this long (the sweeper takes over). */
  timeoutMs?: number;
}

export class KubeJobSubmitter implements JobSubmitter, BatchSubmitter {
  private readonly api: k8s.CustomObjectsApi;

  constructor(kc: k8s.KubeConfig, private readonly opts: KubeSubmitterOptions) {
    // The sweeper takes over a create that times out, so the timeout can be short.
    this.api = makeKubeClient(kc, k8s.CustomObjectsApi, keepAliveTransport({ maxSockets: opts.maxSockets, timeoutMs: opts.timeoutMs ?? 10_000 }));
  }

  static fromKubeconfig(path: string | undefined, opts: KubeSubmitterOptions): KubeJobSubmitter {
    return new KubeJobSubmitter(loadKubeConfig(path), opts);
  }

  async submit(mj: MediaJob): Promise<void> {
    await this.create(MEDIAJOB_PLURAL, mj);
  }

  async submitBatch(mb: MediaBatch): Promise<void> {
    await this.create(MEDIABATCH_PLURAL, mb);
  }

  async resumeBatch(namespace: string, name: string): Promise<void> {
    await this.api.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace, plural: MEDIABATCH_PLURAL, name, body: { spec: { paused: false } } }, MERGE_PATCH);
  }

  private async create(plural: string, obj: MediaJob | MediaBatch): Promise<void> {
    const { namespace } = obj.metadata;
    if (namespace !== this.opts.namespace) {
      throw new Error(`${obj.kind} ${obj.metadata.name ?? '(unnamed)'} is for namespace ${namespace ?? '(none)'}, not ${this.opts.namespace}`);
    }
    try {
      await this.api.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural, body: obj });
    } catch (err) {
      // A retry of the same job or batch; any other 409 (or error) is a failure the sweeper recovers from.
      if (isAlreadyExists(err)) return;
      throw err;
    }
  }
}
