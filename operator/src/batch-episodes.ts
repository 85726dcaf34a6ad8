// A batch's episode MediaJobs: built from the episode rows Postgres holds
// (lib/src/db/batches.ts episodesToCreate) with the one MediaJob builder
// (lib/src/mediajob/build.ts), owned by their MediaBatch, and created a page
// at a time at the shared rate (batch-rate.ts). What each episode is, and
// when a batch may have its episodes created, is Postgres's; running them is
// the MediaJob controller's.
import type * as k8s from '@kubernetes/client-node';
import type pg from 'pg';
import { episodesToCreate } from '@mediajobs/lib/db/batches';
import { markEpisodesCreated, type EpisodeToCreate } from '@mediajobs/lib/db/jobs';
import { isAlreadyExists } from '@mediajobs/lib/kube-client';
import { ORGANIZATION_LABEL, buildMediaJob } from '@mediajobs/lib/mediajob/build';
import {
  API_VERSION, GROUP, MEDIAJOB_PLURAL, VERSION, type BatchKind, type EpisodeMetadata, type MediaBatch, type MediaJob,
} from '@mediajobs/lib/mediajob/types';
import type { CreationRate } from './batch-rate.js';

/** Label on every episode MediaJob naming its MediaBatch (when the name fits a label value). */
export const BATCH_LABEL = 'mediajobs.io/batch';
/** Creations in flight at once within a page. */
const CREATE_CONCURRENCY = 10;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** The feed's word on a show episode, for its runner (spec rule 6); playlist videos speak for themselves. */
export function episodeMetadata(kind: BatchKind, info: EpisodeToCreate['info']): EpisodeMetadata | undefined {
  if (kind !== 'show' || !info) return undefined;
  const m: EpisodeMetadata = {
    ...(info.title !== undefined && { title: info.title }),
    ...(info.releaseDate !== undefined && { releaseDate: info.releaseDate }),
    ...(info.thumbnailUrl !== undefined && { thumbnailUrl: info.thumbnailUrl }),
  };
  return Object.keys(m).length ? m : undefined;
}

/** One episode's MediaJob: named after its job id, controlled by the MediaBatch, marked as a show episode for shows. */
export function episodeMediaJob(mb: MediaBatch, batchId: string, kind: BatchKind, row: EpisodeToCreate): MediaJob {
  const mj = buildMediaJob({
    jobId: row.id, apiKeyId: row.api_key_id, organizationId: mb.metadata.labels?.[ORGANIZATION_LABEL], namespace: mb.metadata.namespace!,
    options: row.options, ...(row.destination && { destination: row.destination }), batchId,
  });
  const name = mb.metadata.name!;
  if (name.length <= 63 && LABEL_VALUE.test(name)) mj.metadata.labels = { ...mj.metadata.labels, [BATCH_LABEL]: name };
  (mj.metadata as k8s.V1ObjectMeta).ownerReferences = [{
    apiVersion: API_VERSION, kind: 'MediaBatch', name, uid: mb.metadata.uid!, controller: true, blockOwnerDeletion: true,
  }];
  const episode = episodeMetadata(kind, row.info);
  mj.spec = { ...mj.spec, ...(kind === 'show' && { showEpisode: true }), ...(episode && { episode }) };
  return mj;
}

export interface PageResult {
  /** MediaJobs made (or found made) in this pass. */
  created: number;
  /** Episodes may remain: look again when the rate allows another page. */
  more: boolean;
}

/**
 * Create the next episodes' MediaJobs, as many as the rate allows now, and
 * record them as created. An AlreadyExists is a MediaJob made by an earlier
 * pass that did not get to record it. Failures after some creations still
 * record those that were made, then throw (the pass is retried).
 */
export async function createEpisodePage(
  d: { custom: k8s.CustomObjectsApi; pool: pg.Pool; rate: CreationRate },
  mb: MediaBatch, batchId: string, kind: BatchKind,
): Promise<PageResult> {
  const granted = d.rate.take(d.rate.page);
  if (!granted) return { created: 0, more: true };
  const rows = await episodesToCreate(d.pool, batchId, granted);
  d.rate.giveBack(granted - rows.length);
  const made: { jobId: string; namespace: string; name: string }[] = [];
  let failure: unknown;
  for (let i = 0; i < rows.length && failure === undefined; i += CREATE_CONCURRENCY) {
    await Promise.all(rows.slice(i, i + CREATE_CONCURRENCY).map(async (row) => {
      const mj = episodeMediaJob(mb, batchId, kind, row);
      try {
        await d.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, body: mj });
      } catch (err) {
        if (!isAlreadyExists(err)) {
          failure ??= err;
          return;
        }
      }
      made.push({ jobId: row.id, namespace: mj.metadata.namespace!, name: mj.metadata.name! });
    }));
  }
  await markEpisodesCreated(d.pool, made);
  if (failure !== undefined) throw failure;
  return { created: made.length, more: rows.length === granted };
}
