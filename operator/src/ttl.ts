// Finished MediaJobs go after their TTL (Postgres keeps the record: ADR
// 0002): the spec's ttlSecondsAfterFinished, else FINISHED_MEDIAJOB_TTL_SECONDS
// for the gateway's; a manifest's without one is kept. Until then the pass says when to look again; it
// schedules nothing itself.
import type * as k8s from '@kubernetes/client-node';
import { isNotFound } from '@mediajobs/lib/kube-client';
import type { Logger } from '@mediajobs/lib/logger';
import { DONE, type ReconcileResult } from '@mediajobs/lib/reconcile';
import { GROUP, MEDIAJOB_PLURAL, VERSION, jobIdOf, type MediaJob } from '@mediajobs/lib/mediajob/types';

/**
 * Past the deadline, so a timer that fires a little early (finishTime is
 * whole seconds) does not find the TTL a few ms short and ask again.
 */
const MARGIN_MS = 1000;

/**
 * The TTL of a finished MediaJob: its own spec.ttlSecondsAfterFinished; else
 * the operator's for the gateway's MediaJobs (spec.jobId set); else none. A
 * manifest's MediaJob (GitOps, kubectl) is kept: a pipeline that applies it
 * again every few minutes finds it finished and nothing runs twice, where a
 * deleted one would be created afresh and download again (issue 18).
 */
export function finishedTtlSeconds(mj: Pick<MediaJob, 'spec'>, gatewayTtlSeconds: number): number | undefined {
  return mj.spec.ttlSecondsAfterFinished ?? (mj.spec.jobId ? gatewayTtlSeconds : undefined);
}

/** How long until a job finished at `finishTime` is due for deletion (<= 0: due now). No finish time counts as now. */
export function ttlRemainingMs(finishTime: string | undefined, ttlSeconds: number, now: number): number {
  const finished = Date.parse(finishTime ?? '') || now;
  return finished + ttlSeconds * 1000 - now;
}

/** Delete a finished MediaJob once its TTL has passed; until then, the pass's answer is when to look again. */
export async function deleteAfterTtl(
  custom: k8s.CustomObjectsApi, mj: MediaJob, finishTime: string | undefined, ttlSeconds: number, log: Logger,
): Promise<ReconcileResult> {
  const remaining = ttlRemainingMs(finishTime, ttlSeconds, Date.now());
  if (remaining > 0) return { requeueAfter: remaining + MARGIN_MS };
  try {
    await custom.deleteNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, name: mj.metadata.name!,
      propagationPolicy: 'Background',
    });
    log.info({ jobId: jobIdOf(mj) }, 'finished MediaJob deleted after its TTL; Postgres keeps the record');
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  return DONE;
}
