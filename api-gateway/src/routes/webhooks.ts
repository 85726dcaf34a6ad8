// Signed webhooks (issue 15): the API key's signing secret
// (POST/GET /user/webhook-secret) and a job's delivery log with redelivery
// (GET /jobs/{id}/webhooks, POST /jobs/{id}/webhooks/{event_id}/redeliver).
// Authentication is app.ts's (/user and /jobs need a key). The secrets'
// statements are lib/src/db/webhook-secrets.ts's, the events'
// lib/src/db/outbox.ts's, the attempts' lib/src/db/webhook-log.ts's; the
// operator's dispatcher (operator/src/outbox.ts) sends and signs.
import { Router, type RequestHandler, type Response } from 'express';
import { getJob } from '@mediajobs/lib/db/jobs';
import { jobEvents, redeliverEvent, type JobEvent } from '@mediajobs/lib/db/outbox';
import { attemptsOf, type AttemptRecord } from '@mediajobs/lib/db/webhook-log';
import { rotateWebhookSecret, webhookSecretInfo } from '@mediajobs/lib/db/webhook-secrets';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { HttpError, failsWith } from '../http-errors.js';
import { isUuid } from '../ids.js';
import { optionalJsonBody } from '../json-body.js';

export interface WebhooksRouteDeps {
  pool: pg.Pool;
  secretBox: SecretBox;
}

export function webhooksRouter(deps: WebhooksRouteDeps): Router {
  const router = Router();
  const noBody = optionalJsonBody();
  router.post('/user/webhook-secret', noBody, failsWith('Failed to create webhook secret'), createSecret(deps));
  router.get('/user/webhook-secret', failsWith('Database query failed'), showSecret(deps));
  router.get('/jobs/:id/webhooks', failsWith('Database query failed'), listDeliveries(deps));
  router.post('/jobs/:id/webhooks/:eventId/redeliver', noBody, failsWith('Failed to redeliver webhook'), redeliver(deps));
  return router;
}

const ms = (d: Date | null): number | null => (d === null ? null : d.getTime());

const apiKeyOf = (res: Response): string => res.locals.principal!.apiKeyId;

/** A new secret, shown this once: 201 for the key's first, 200 for a rotation (the old one signs 24 h more). */
function createSecret(deps: WebhooksRouteDeps): RequestHandler {
  return async (_req, res) => {
    const { secret, info } = await rotateWebhookSecret(deps.pool, deps.secretBox, apiKeyOf(res));
    res.setHeader('Cache-Control', 'no-store');
    res.status(info.rotatedAt ? 200 : 201).json({
      secret,
      created_at: ms(info.createdAt),
      rotated: info.rotatedAt !== null,
      previous_secret_expires_at: ms(info.previousExpiresAt),
    });
  };
}

/** Whether the key has a secret it was shown, and its dates; never the secret. */
function showSecret(deps: WebhooksRouteDeps): RequestHandler {
  return async (_req, res) => {
    const info = await webhookSecretInfo(deps.pool, apiKeyOf(res));
    if (!info?.revealed) {
      res.json({ configured: false, created_at: null, previous_secret_expires_at: null });
      return;
    }
    res.json({ configured: true, created_at: ms(info.createdAt), previous_secret_expires_at: ms(info.previousExpiresAt) });
  };
}

/** The job's id when it is the key's; 404 `Job not found` for another key's, an unknown or a malformed id (as GET /jobs/{id}). */
async function ownJob(deps: WebhooksRouteDeps, res: Response, raw: unknown): Promise<string> {
  const id = String(raw).toLowerCase();
  if (!isUuid(id) || !(await getJob(deps.pool, apiKeyOf(res), id))) throw new HttpError(404, 'Job not found');
  return id;
}

function eventBody(e: JobEvent, attempts: readonly AttemptRecord[]): Record<string, unknown> {
  return {
    event_id: e.event_id,
    type: e.type,
    ...(e.stage !== null && { stage: e.stage }),
    status: e.delivered_at ? 'delivered' : e.failed_at ? 'failed' : 'pending',
    created_at: ms(e.created_at),
    delivered_at: ms(e.delivered_at),
    failed_at: ms(e.failed_at),
    last_error: e.last_error,
    redeliveries: e.redeliveries,
    attempts: attempts.filter((a) => a.outboxId === e.id).map((a) => ({
      round: a.round,
      attempt: a.attempt,
      attempted_at: ms(a.attemptedAt),
      duration_ms: a.durationMs,
      status_code: a.statusCode,
      error: a.error,
      response_excerpt: a.responseExcerpt,
    })),
  };
}

/** GET /jobs/{id}/webhooks: the job's events in delivery order, each with its attempts. */
function listDeliveries(deps: WebhooksRouteDeps): RequestHandler {
  return async (req, res) => {
    const jobId = await ownJob(deps, res, req.params.id);
    const events = await jobEvents(deps.pool, jobId);
    const attempts = await attemptsOf(deps.pool, events.map((e) => e.id));
    res.json({ job_id: jobId, events: events.map((e) => eventBody(e, attempts)) });
  };
}

/** POST /jobs/{id}/webhooks/{event_id}/redeliver: 202, the dispatcher sends it again with the same webhook-id. */
function redeliver(deps: WebhooksRouteDeps): RequestHandler {
  return async (req, res) => {
    const jobId = await ownJob(deps, res, req.params.id);
    const eventId = String(req.params.eventId).toLowerCase();
    const result = isUuid(eventId) ? await redeliverEvent(deps.pool, jobId, eventId) : undefined;
    if (result?.outcome === 'queued') {
      res.status(202).json(eventBody(result.event, await attemptsOf(deps.pool, [result.event.id])));
      return;
    }
    if (result?.outcome === 'open') throw new HttpError(409, 'Webhook event is still being delivered');
    throw new HttpError(404, 'Webhook event not found for this job');
  };
}
