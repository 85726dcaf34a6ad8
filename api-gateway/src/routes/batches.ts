// Batches (issue 13): a show or a genuine playlist URL on POST /jobs made
// into a batch (createBatch, called by ./jobs.ts), and the batch endpoints
// GET /batch/{id}, PATCH /batch/{id}/jobs and POST /batch/{id}/start. The
// batch row and its episode rows are written in one transaction
// (lib/src/db/batches.ts), whose commit is the acceptance. The operator
// creates the MediaBatch from the row (its materializer; the object carries
// neither the episodes nor the webhook URL) and the episode MediaJobs from
// the episode rows (its batch controller). Starting a paused batch moves the
// row only; the operator hears it (NOTIFY) and unpauses the object. A batch
// applied with kubectl is paused by its manifest's spec.paused, which its
// applier owns (docs/gitops.md, "Starting a paused MediaBatch"): the start
// is refused with 409, saying to change the manifest.
import { Router, type RequestHandler, type Response } from 'express';
import {
  BatchSourceError, type BatchSourceOf, type BatchSources, type ExpandedBatch,
} from '@mediajobs/lib/batches/index';
import {
  getBatch, insertBatch, renameEpisodes, startBatch,
  type BatchRecord, type BatchRefusal, type BatchTarget, type EpisodeInfo, type EpisodeRename, type NewEpisode,
} from '@mediajobs/lib/db/batches';
import type { NewJob } from '@mediajobs/lib/db/jobs';
import type { NewKeyRow, StoredAnswer } from '@mediajobs/lib/db/idempotency';
import type { JobRequest } from '@mediajobs/lib/job-options';
import type { Logger } from '@mediajobs/lib/logger';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { z } from 'zod';
import { parseRequestBody } from '@mediajobs/lib/request-body';
import type { Principal } from '../auth.js';
import { resolveByProviderSql, resolveDefaultSql } from '../destinations/store.js';
import { HttpError, failsWith, invalidBody } from '../http-errors.js';
import { isUuid, uuidv7 } from '../ids.js';
import { acceptJson, optionalJsonBody } from '../json-body.js';
import type { GatewayMetrics } from '../metrics.js';

export const NOT_FOUND = 'Batch not found';
export const NOT_OWNER = 'Batch does not belong to this API key';
export const NOT_PAUSED_RENAME = 'Batch is not paused. Only paused batches can be renamed.';
export const notPausedToStart = (status: string) => `Batch is not paused (current status: ${status})`;
/** POST /batch/{id}/start on a batch a MediaBatch manifest holds paused: only its applier may change spec.paused. */
export const pausedByManifest = (mediaBatch: string) => `Batch is paused by the spec of its MediaBatch ${mediaBatch}, applied with kubectl: `
  + 'set spec.paused to false in that manifest and apply it (in Git, for a GitOps pipeline)';
const RENAME_BODY_BYTES = 1024 * 1024;

export interface BatchCreateDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  namespace: string;
  outbound: OutboundPolicy;
  /** Expands shows (lookup API + RSS feed) and playlists (yt-dlp flat, /metadata's settings). */
  batchSources: BatchSources;
  /** Wakes the operator's materializer once accepted rows have committed (lib/src/db/materialize.ts). */
  pokeMaterializer: () => void;
  /** Counts the episodes accepted (metrics.ts). */
  metrics?: GatewayMetrics;
}

export interface NewBatchRequest {
  request: JobRequest;
  source: BatchSourceOf<'show'> | BatchSourceOf<'playlist'>;
  who: Principal;
  /** The delivery target POST /jobs decided (inline checked and sealed, or rule 9). */
  target: NewJob['target'];
  /** Aborted when the client goes away: the expansion stops. */
  signal?: AbortSignal;
}

/** An episode entry of the show answer: description and release_date in default mode only (spec: Episode entry). */
type EpisodeEntry = { job_id: string; url: string; title: string; description?: string | null; release_date?: string | null };

export type BatchCreated =
  | { batch_id: string; total_episodes: number; paused: boolean; episodes: EpisodeEntry[]; episode_jobs: string[] }
  | { batch_id: string; total_videos: number; job_ids: string[] };

/** An AbortSignal that fires when the client closes the connection before the answer was sent. */
export function clientGone(res: Response): AbortSignal {
  const ac = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) ac.abort();
  });
  return ac.signal;
}

async function expand(deps: BatchCreateDeps, source: NewBatchRequest['source'], signal?: AbortSignal): Promise<ExpandedBatch> {
  try {
    return await deps.batchSources.expand(source, signal);
  } catch (err) {
    if (!(err instanceof BatchSourceError)) throw err;
    // A 5xx (the platform, the feed or yt-dlp failing) is logged with its reason; a 4xx is the client's answer only.
    throw new HttpError(err.status, err.message, {}, err.status >= 500 ? { cause: err } : undefined);
  }
}

function episodeInfo(expanded: ExpandedBatch, i: number): EpisodeInfo {
  if (expanded.kind === 'playlist') {
    const e = expanded.episodes[i]!;
    return e.title !== undefined ? { title: e.title } : {};
  }
  const e = expanded.episodes[i]!;
  return {
    title: e.title,
    ...(e.description !== undefined && { description: e.description }),
    ...(e.releaseDate !== undefined && { releaseDate: e.releaseDate }),
    ...(e.imageUrl !== undefined && { thumbnailUrl: e.imageUrl }),
  };
}

/**
 * POST /jobs with a show or genuine playlist URL (rule 8): expand it (413
 * over MAX_PLAYLIST_SIZE, a 4xx/502 when unreadable, nothing written), record
 * the batch and every episode in one transaction, whatever the size.
 */
export async function createBatch(
  deps: BatchCreateDeps, n: NewBatchRequest, keyRow: (answer: StoredAnswer) => NewKeyRow | undefined = () => undefined,
): Promise<BatchCreated> {
  const expanded = await expand(deps, n.source, n.signal);
  // An episode URL is what a runner downloads: held to the policy a single job's `url` is.
  if (expanded.episodes.some((e) => !deps.outbound.checkUrl(e.url).ok)) {
    throw new HttpError(400, 'Batch has an episode at a local or link-local address, which is not allowed');
  }
  const { apiKeyId } = n.who;
  const { url: showUrl, filename: _filename, folder, ...options } = n.request.options;
  const paused = expanded.kind === 'show' && n.request.paused; // rule 7: shows only
  const batchId = uuidv7();
  const episodes: NewEpisode[] = expanded.episodes.map((e, i) => ({ id: uuidv7(), url: e.url, info: episodeInfo(expanded, i) }));
  const target: BatchTarget = n.target.kind === 'inline'
    ? n.target
    : { ...n.target, rule9: { byDefault: resolveDefaultSql, byProvider: resolveByProviderSql } };

  const answer = batchAnswer(expanded, batchId, episodes.map((e) => e.id), paused);
  const inserted = await insertBatch(deps.pool, {
    id: batchId, apiKeyId, kind: expanded.kind, showUrl, folder: folder ?? null, paused,
    webhookUrl: n.request.webhookUrl === undefined ? null : deps.secretBox.sealable(n.request.webhookUrl),
    crNamespace: deps.namespace, crName: batchId, options, target,
    keyRow: keyRow({ status: 201, body: answer, location: `/batch/${batchId}` }),
  }, episodes);
  if (inserted.outcome === 'storage_provider_not_configured') throw new HttpError(400, 'storage_provider_not_configured');
  if (inserted.outcome !== 'inserted') throw new Error(`insertBatch of a new batch answered ${inserted.outcome}`);
  deps.pokeMaterializer();
  deps.metrics?.jobsAccepted('batch', episodes.length);

  return answer;
}

/** The 201 answer of a batch (spec: the show and playlist answers of POST /jobs). */
function batchAnswer(expanded: ExpandedBatch, batchId: string, ids: string[], paused: boolean): BatchCreated {
  if (expanded.kind === 'playlist') return { batch_id: batchId, total_videos: ids.length, job_ids: ids };
  return {
    batch_id: batchId,
    total_episodes: ids.length,
    paused,
    episodes: expanded.episodes.map((e, i) => ({
      job_id: ids[i]!, url: e.url, title: e.title,
      ...(!paused && { description: e.description ?? null, release_date: e.releaseDate ?? null }),
    })),
    episode_jobs: ids,
  };
}

// ---- GET /batch/{id}, PATCH /batch/{id}/jobs, POST /batch/{id}/start ----

export interface BatchesRouteDeps {
  pool: pg.Pool;
  logger: Logger;
}

function principal(res: Response): Principal {
  return res.locals.principal!;
}

/** The batch of the path's id, owned by the caller: 404 when unknown or not a UUID, 401 when another key's. */
async function ownBatch(deps: BatchesRouteDeps, rawId: unknown, res: Response): Promise<BatchRecord> {
  const id = String(rawId);
  const batch = isUuid(id) ? await getBatch(deps.pool, id.toLowerCase()) : undefined;
  if (!batch) throw new HttpError(404, NOT_FOUND);
  if (batch.api_key_id !== principal(res).apiKeyId) throw new HttpError(401, NOT_OWNER);
  return batch;
}

function refused(r: BatchRefusal, notPaused: (status: string) => string): HttpError {
  if (r.outcome === 'not_found') return new HttpError(404, NOT_FOUND);
  if (r.outcome === 'not_owner') return new HttpError(401, NOT_OWNER);
  return new HttpError(400, notPaused(r.status));
}

export function batchesRouter(deps: BatchesRouteDeps): Router {
  const router = Router();
  router.get('/batch/:id', failsWith('Database query failed'), showBatch(deps));
  router.patch('/batch/:id/jobs', ...acceptJson(RENAME_BODY_BYTES), failsWith('Failed to rename episodes'), renameBatchJobs(deps));
  router.post('/batch/:id/start', optionalJsonBody(), failsWith('Failed to start batch'), startPausedBatch(deps));
  return router;
}

/** The Batch record (spec: Batch), plus `kind` and `progress` (integer percent, rounded down). */
export function batchResponse(b: BatchRecord): Record<string, unknown> {
  const done = b.completed_episodes + b.failed_episodes;
  return {
    id: b.id,
    kind: b.kind,
    show_url: b.show_url,
    status: b.status,
    folder: b.folder,
    total_episodes: b.total_episodes,
    completed_episodes: b.completed_episodes,
    failed_episodes: b.failed_episodes,
    skipped_episodes: b.skipped_episodes,
    progress: b.total_episodes > 0 ? Math.floor((done / b.total_episodes) * 100) : 0,
    episode_jobs: b.episode_jobs,
    created_at: b.created_at,
    finished_at: b.finished_at,
  };
}

function showBatch(deps: BatchesRouteDeps): RequestHandler {
  return async (req, res) => {
    res.json(batchResponse(await ownBatch(deps, req.params.id, res)));
  };
}

/** The PATCH /batch/{id}/jobs body (the OpenAPI document's RenameEpisodesRequest). */
export const renameEpisodesRequest = z.object({
  renames: z.array(
    z.object({
      job_id: z.string({ error: 'must be a string' }),
      filename: z.string({ error: 'must be a string' }).describe('Without extension; POST /jobs rule 1 applies'),
    }, { error: 'must be an object with job_id and filename' }),
    { error: 'must be an array' },
  ),
});

/** `renames` of the PATCH body; 400 naming the first bad entry. */
function parseRenames(body: unknown): EpisodeRename[] {
  const r = parseRequestBody(renameEpisodesRequest, body);
  if (!r.ok) throw invalidBody(r);
  return r.data.renames.map((e) => ({ jobId: e.job_id, filename: e.filename }));
}

function renameBatchJobs(deps: BatchesRouteDeps): RequestHandler {
  return async (req, res) => {
    const id = String(req.params.id);
    if (!isUuid(id)) throw new HttpError(404, NOT_FOUND);
    const renames = parseRenames(req.body);
    const r = await renameEpisodes(deps.pool, id.toLowerCase(), principal(res).apiKeyId, renames);
    if (r.outcome !== 'renamed') throw refused(r, () => NOT_PAUSED_RENAME);
    res.json({ updated: r.updated, errors: r.errors.map((e) => e.message) });
  };
}

function startPausedBatch(deps: BatchesRouteDeps): RequestHandler {
  return async (req, res) => {
    const batch = await ownBatch(deps, req.params.id, res);
    const r = await startBatch(deps.pool, batch.id, principal(res).apiKeyId, 'api');
    if (r.outcome === 'held_by_manifest') throw new HttpError(409, pausedByManifest([r.crNamespace, r.crName].filter(Boolean).join('/')));
    if (r.outcome !== 'started') throw refused(r, notPausedToStart);
    res.json({ batch_id: batch.id, started_jobs: r.startedJobs, status: 'processing' });
  };
}
