// A MediaBatch applied with kubectl (GitOps) has no batch row: this records
// one for the key its spec names, as the gateway would have, so the batch
// appears in that key's GET /batch/{id} and GET /jobs. Its episodes are the
// spec's list when it has one, else the show's feed or the playlist's videos
// (lib/src/batches, with the deployment's lookup endpoint, size limit and
// outbound policy). The batch id is metadata.uid unless spec.batchId names
// one. A failure no retry mends (an invalid owner, a URL that is no batch,
// a show not found, too many episodes) is a PermanentError the controller
// records on the MediaBatch; fetch failures are retried.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import {
  BatchSourceError, detectBatchSource, type BatchSources, type ExpandedBatch,
} from '@mediajobs/lib/batches/index';
import { insertBatch, type NewEpisode } from '@mediajobs/lib/db/batches';
import { normaliseSpecOptions } from '@mediajobs/lib/job-options';
import { PermanentError, TemporaryError } from '@mediajobs/lib/reconcile';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type { BatchKind, MediaBatch, Owned } from '@mediajobs/lib/mediajob/types';

/** The owner a manifest names is not an active key: the batch is never recorded (as for a MediaJob manifest). */
export const BATCH_INVALID_OWNER = { reason: 'invalid_owner', message: 'spec.owner.apiKeyId does not name an active API key' } as const;

export interface BatchRecorderDeps {
  pool: pg.Pool;
  box: SecretBox;
  sources: BatchSources;
  /** MAX_PLAYLIST_SIZE, also for a manifest's own episode list. */
  maxEpisodes: number;
}

/** The batch id of a MediaBatch: spec.batchId (gateway-made) or metadata.uid (kubectl-applied). */
export function batchIdOf(mb: MediaBatch): string {
  return mb.spec.batchId ?? mb.metadata.uid!;
}

/** Record a kubectl-applied MediaBatch and its episodes; nothing is written unless all of it is. */
export async function recordManifestBatch(d: BatchRecorderDeps, mb: Owned<MediaBatch>): Promise<void> {
  const { kind, episodes } = await episodesOf(d, mb);
  const { url: _u, filename: _f, folder: _d, ...options } = normaliseSpecOptions({ ...mb.spec.options, url: mb.spec.showUrl });
  const r = await insertBatch(d.pool, {
    id: batchIdOf(mb),
    apiKeyId: mb.spec.owner.apiKeyId,
    kind,
    showUrl: mb.spec.showUrl,
    folder: mb.spec.folder ?? null,
    paused: kind === 'show' && mb.spec.paused,
    webhookUrl: mb.spec.webhookUrl ? d.box.sealable(mb.spec.webhookUrl) : null,
    crNamespace: mb.metadata.namespace ?? null,
    crName: mb.metadata.name ?? null,
    options,
    target: { kind: 'given', destination: mb.spec.destination },
    fromManifest: true,
  }, episodes);
  if (r.outcome === 'invalid_owner') throw new PermanentError(BATCH_INVALID_OWNER.reason, BATCH_INVALID_OWNER.message);
}

/** The episodes: the spec's own list, else the show or playlist expanded now. */
async function episodesOf(d: BatchRecorderDeps, mb: MediaBatch): Promise<{ kind: BatchKind; episodes: NewEpisode[] }> {
  const detected = detectBatchSource(mb.spec.showUrl);
  const listed = mb.spec.episodes;
  if (listed?.length) {
    if (listed.length > d.maxEpisodes) {
      throw new PermanentError('too_large', `spec.episodes has more than ${d.maxEpisodes} entries; batches are limited to ${d.maxEpisodes} and never truncated`);
    }
    const kind = mb.spec.kind ?? (detected.kind === 'playlist' ? 'playlist' : 'show');
    return {
      kind,
      episodes: listed.map((e) => ({
        id: e.jobId ?? randomUUID(), url: e.url,
        ...(e.filename !== undefined && { filename: e.filename }),
        info: {
          ...(e.title !== undefined && { title: e.title }),
          ...(e.description !== undefined && { description: e.description }),
          ...(e.releaseDate !== undefined && { releaseDate: e.releaseDate }),
        },
      })),
    };
  }
  if (detected.kind === 'single') {
    throw new PermanentError('not_a_batch', 'spec.showUrl is neither a podcast show nor a genuine playlist (rule 8), and spec.episodes is empty');
  }
  const expanded = await expand(d.sources, detected);
  return { kind: expanded.kind, episodes: episodesOfExpansion(expanded) };
}

async function expand(sources: BatchSources, source: Parameters<BatchSources['expand']>[0]): Promise<ExpandedBatch> {
  try {
    return await sources.expand(source);
  } catch (err) {
    if (!(err instanceof BatchSourceError)) throw err;
    // 4xx: the show or playlist is not there or too large; asking again will not change it.
    if (err.status >= 400 && err.status < 500) throw new PermanentError(err.code, err.message, { cause: err });
    throw new TemporaryError(err.message, err.code === 'busy' ? 5_000 : undefined, { cause: err });
  }
}

function episodesOfExpansion(x: ExpandedBatch): NewEpisode[] {
  if (x.kind === 'playlist') {
    return x.episodes.map((e) => ({ id: randomUUID(), url: e.url, ...(e.title !== undefined && { info: { title: e.title } }) }));
  }
  return x.episodes.map((e) => ({
    id: randomUUID(),
    url: e.url,
    info: {
      title: e.title,
      ...(e.description !== undefined && { description: e.description }),
      ...(e.releaseDate !== undefined && { releaseDate: e.releaseDate }),
      ...(e.imageUrl !== undefined && { thumbnailUrl: e.imageUrl }),
    },
  }));
}
