// Runner pods by "namespace/jobName", fed by the pod informer, so a pass
// finds its Job's latest pod without scanning every pod.
import type * as k8s from '@kubernetes/client-node';

const keyOf = (ns: string | undefined, jobName: string) => `${ns}/${jobName}`;

export class PodIndex {
  private readonly byJob = new Map<string, Map<string, k8s.V1Pod>>();

  /** An informer event: add or replace the pod, or drop it when deleted. */
  update(pod: k8s.V1Pod, deleted: boolean): void {
    const jobName = pod.metadata?.labels?.['batch.kubernetes.io/job-name'] ?? pod.metadata?.labels?.['job-name'];
    if (!jobName) return;
    const key = keyOf(pod.metadata?.namespace, jobName);
    let pods = this.byJob.get(key);
    if (deleted) {
      pods?.delete(pod.metadata!.name!);
      if (pods && !pods.size) this.byJob.delete(key);
      return;
    }
    if (!pods) this.byJob.set(key, (pods = new Map()));
    pods.set(pod.metadata!.name!, pod);
  }

  /** After a relist the cache is the truth: rebuild the index from it. */
  rebuild(pods: Iterable<k8s.V1Pod>): void {
    this.byJob.clear();
    for (const pod of pods) this.update(pod, false);
  }

  /** The Job's most recently created pod (a retried Job has several). */
  latest(ns: string, jobName: string): k8s.V1Pod | undefined {
    let latest: k8s.V1Pod | undefined;
    let latestAt = -1;
    for (const pod of this.byJob.get(keyOf(ns, jobName))?.values() ?? []) {
      const t = pod.metadata?.creationTimestamp ? new Date(pod.metadata.creationTimestamp).getTime() : 0;
      if (t >= latestAt) {
        latest = pod;
        latestAt = t;
      }
    }
    return latest;
  }
}
