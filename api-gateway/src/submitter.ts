// Creating the MediaJob custom resource of a new job. The row in Postgres
// is the source of truth; if this create fails the job stays Pending and the
// operator's sweeper creates the resource later, so a submit error never
// fails the request. The route builds the MediaJob (lib's buildMediaJob, the
// sweeper's builder too, so a job re-submitted from its row is identical) and
// this creates exactly that object.

import * as k8s from '@kubernetes/client-node';
import { isAlreadyExists, keepAliveTransport, loadKubeConfig, makeKubeClient } from '@mediajobs/lib/kube-client';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob } from '@mediajobs/lib/mediajob/types';

export interface JobSubmitter {
  /** Create this MediaJob; resolves when it exists (AlreadyExists counts as success). */
  submit(mj: MediaJob): Promise<void>;
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

export class KubeJobSubmitter implements JobSubmitter {
  private readonly api: k8s.CustomObjectsApi;

  constructor(kc: k8s.KubeConfig, private readonly opts: KubeSubmitterOptions) {
    // The sweeper takes over a create that times out, so the timeout can be short.
    this.api = makeKubeClient(kc, k8s.CustomObjectsApi, keepAliveTransport({ maxSockets: opts.maxSockets, timeoutMs: opts.timeoutMs ?? 10_000 }));
  }

  static fromKubeconfig(path: string | undefined, opts: KubeSubmitterOptions): KubeJobSubmitter {
    return new KubeJobSubmitter(loadKubeConfig(path), opts);
  }

  async submit(mj: MediaJob): Promise<void> {
    const { namespace } = mj.metadata;
    if (namespace !== this.opts.namespace) {
      throw new Error(`MediaJob ${mj.metadata.name ?? '(unnamed)'} is for namespace ${namespace ?? '(none)'}, not ${this.opts.namespace}`);
    }
    try {
      await this.api.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: MEDIAJOB_PLURAL, body: mj });
    } catch (err) {
      // A retry of the same job; any other 409 (or error) is a failure the sweeper recovers from.
      if (isAlreadyExists(err)) return;
      throw err;
    }
  }
}
