// The outbox table: webhook events waiting for delivery. This module owns
// every statement on it — queueing a transition's events inside the
// transaction that changes the job row (lib/src/db/jobs.ts syncStatus) or
// the batch row (lib/src/db/batches.ts, batch_completed), the NOTIFY that
// wakes the dispatcher, and the dispatcher's claim and outcome writes. The delivery loop, the HTTP POST and LISTEN stay in
// operator/src/outbox.ts; which events a transition has is
// operator/src/webhook-events.ts's. Also the job's events for GET
// /jobs/{id}/webhooks and their redelivery. The claim reads the API key of
// the event's job or batch (whose secret signs it) from those tables.
import { createHash } from 'node:crypto';
import type pg from 'pg';

/** An event to queue for a job's webhook. */
export interface OutboxEvent {
  type: string;
  payload: Record<string, unknown>;
  /** What makes the event unique for its job (its event id's seed) when the type alone does not: `progress:<stage>`. */
  key?: string;
}

/** An event claimed for one delivery attempt. */
export interface ClaimedEvent {
  id: string;
  event_id: string;
  type: string;
  /**
   * The webhook or chat URL, sealed with the SecretBox; null for a billing
   * report (Stripe's address is a setting). A copy of the job's, batch's or
   * chat setting's value: it opens with that place (./sealed-columns.ts
   * outboxTargetAt, from job_id, batch_id and chat_key_id).
   */
  target_enc: string | null;
  job_id: string | null;
  batch_id: string | null;
  /** A chat notification's key, whose chat setting the target copies. */
  chat_key_id: string | null;
  payload: Record<string, unknown>;
  /** Attempts so far, this one included: counted when claimed (since the last redelivery). */
  attempts: number;
  /** Times the event was sent again on request: its attempts' round in the delivery log. */
  redeliveries: number;
  /** The job's (or batch's) API key: whose secret signs the delivery. */
  api_key_id: string | null;
  channel: OutboxChannel;
}

/**
 * `webhook`: a job's or batch's event, signed. `chat`: a chat notification,
 * its payload the chat service's JSON, sent unsigned. `billing`: a completed
 * job's usage report to Stripe, its payload a UsageReport (lib/src/billing.ts).
 */
export type OutboxChannel = 'webhook' | 'chat' | 'billing';
export const OUTBOX_CHANNELS: readonly OutboxChannel[] = ['webhook', 'chat', 'billing'];

/** The channel a queued event is announced on; the dispatcher LISTENs to it. */
export const OUTBOX_CHANNEL = 'mediajobs_outbox';

/**
 * A stable event id per job (or batch) and event type (a UUID from sha256 of
 * `id:seed`): a replayed transition inserts nothing new. Receivers already
 * hold these ids, so the derivation must never change.
 */
export function eventId(subjectId: string, type: string): string {
  const h = createHash('sha256').update(`${subjectId}:${type}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Queue a transition's events in the caller's transaction (the one that
 * changed the job row), so both commit or neither does; an event already
 * queued (same id) is left as it is. The NOTIFY is delivered on commit.
 * An episode's events name its batch, so the batch's own events wait for them.
 */
export async function queueEvents(
  client: pg.ClientBase, jobId: string, targetEnc: string, events: readonly OutboxEvent[], batchId: string | null = null,
): Promise<void> {
  await insertEvents(client, { jobId, batchId, idSeed: jobId }, targetEnc, events);
}

/**
 * Queue a batch's events (batch_completed) in the transaction that changed
 * the batch row; ids come from the batch id, so a batch has each at most once.
 */
export async function queueBatchEvents(client: pg.ClientBase, batchId: string, targetEnc: string, events: readonly OutboxEvent[]): Promise<void> {
  await insertEvents(client, { jobId: null, batchId, idSeed: batchId }, targetEnc, events);
}

// Only the types the job's or batch's filter names (docs/adr/0029): a job's
// is its options' webhookEvents, a batch's event its webhook_events; none
// (the request named none) lets every type through. Read here, in the
// statement, so every path that queues an event (status mirror,
// cancellation, batch roll-up) obeys it.
const INSERT_EVENT = `INSERT INTO outbox (event_id, job_id, batch_id, type, target_enc, payload, attempts, next_attempt_at, created_at)
  SELECT $1, $2, $3, $4, $5, $6, 0, now(), now()
   WHERE CASE WHEN $2::uuid IS NOT NULL
              THEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = $2::uuid AND jsonb_typeof(j.options->'webhookEvents') = 'array'
                                                      AND NOT (j.options->'webhookEvents') ? $4)
              ELSE NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = $3::uuid AND b.webhook_events IS NOT NULL
                                                         AND NOT $4 = ANY (b.webhook_events)) END
  ON CONFLICT (event_id) DO NOTHING`;

async function insertEvents(
  client: pg.ClientBase, subject: { jobId: string | null; batchId: string | null; idSeed: string }, targetEnc: string,
  events: readonly OutboxEvent[],
): Promise<void> {
  for (const e of events) {
    const id = eventId(subject.idSeed, e.key ?? e.type);
    await client.query(INSERT_EVENT, [id, subject.jobId, subject.batchId, e.type, targetEnc, JSON.stringify({ ...e.payload, event_id: id })]);
  }
  if (events.length) await client.query(`NOTIFY ${OUTBOX_CHANNEL}`);
}

/** The type of a chat notification's outbox row. */
export const CHAT_NOTIFICATION = 'chat_notification';

/**
 * Queue a job's chat notification (a failed job's, at most one per job: its
 * event id comes from the job id) in the transaction that recorded its
 * ending. It names no job, so it goes out at once, beside the job's webhook
 * events rather than behind them; the payload is sent as it is.
 */
export async function queueChatNotification(
  client: pg.ClientBase, jobId: string, apiKeyId: string, targetEnc: string, message: object,
): Promise<void> {
  await client.query(
    `INSERT INTO outbox (event_id, job_id, batch_id, type, target_enc, payload, attempts, next_attempt_at, created_at, channel, chat_key_id)
     VALUES ($1, NULL, NULL, $2, $3, $4, 0, now(), now(), 'chat', $5) ON CONFLICT (event_id) DO NOTHING`,
    [eventId(jobId, CHAT_NOTIFICATION), CHAT_NOTIFICATION, targetEnc, JSON.stringify(message), apiKeyId]);
  await client.query(`NOTIFY ${OUTBOX_CHANNEL}`);
}

/** The type of a billing usage report's outbox row. */
export const USAGE_REPORT = 'usage_report';

/**
 * Queue a completed job's usage report, when its key is billed through
 * Stripe (its own customer, or its marketplace account's for an end user),
 * in the transaction that recorded the completion: at most one per job (its
 * event id comes from the job id, and is the meter event's identifier).
 * `finishedAt` dates the usage: it counts in the period the job ended in.
 */
export async function queueUsageReport(client: pg.ClientBase, jobId: string, apiKeyId: string, bytes: number, finishedAt: Date): Promise<void> {
  const r = await client.query(
    `INSERT INTO outbox (event_id, job_id, batch_id, type, target_enc, payload, attempts, next_attempt_at, created_at, channel)
     SELECT $1::uuid, NULL, NULL, $2, NULL,
            jsonb_build_object('identifier', $1::uuid::text, 'customer', coalesce(k.billing_customer, p.billing_customer),
                               'bytes', $4::bigint, 'timestamp', $5::bigint),
            0, now(), now(), 'billing'
       FROM api_keys k LEFT JOIN api_keys p ON p.id = k.parent_id
      WHERE k.id = $3 AND coalesce(k.billing_customer, p.billing_customer) IS NOT NULL
     ON CONFLICT (event_id) DO NOTHING`,
    [eventId(jobId, USAGE_REPORT), USAGE_REPORT, apiKeyId, bytes, Math.floor(finishedAt.getTime() / 1000)]);
  if (r.rowCount) await client.query(`NOTIFY ${OUTBOX_CHANNEL}`);
}

/**
 * Claim due events; the lease (next_attempt_at pushed forward) keeps others
 * off them meanwhile. Only the oldest open event of each job is due, so a
 * job's events reach the receiver in the order they were written (progress
 * stages, then job_completed) even when one of them needs a retry; jobs
 * still go out in parallel. A batch's own event (no job) is due only when
 * no older event of the batch is open, its episodes' included: a receiver
 * hears batch_completed after every episode's job_completed. Only rows of
 * `channels` (default: all): an operator without Stripe settings leaves the
 * billing reports queued for one that has them.
 */
export async function claimDueEvents(
  pool: pg.Pool, opts: { batch: number; leaseSeconds: number; channels?: readonly OutboxChannel[] },
): Promise<ClaimedEvent[]> {
  const r = await pool.query<ClaimedEvent>(
    `UPDATE outbox SET next_attempt_at = now() + make_interval(secs => $2), attempts = attempts + 1
     WHERE id IN (SELECT o.id FROM outbox o WHERE o.delivered_at IS NULL AND o.failed_at IS NULL AND o.next_attempt_at <= now()
                    AND o.channel = ANY($3::text[])
                    AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.job_id = o.job_id AND p.id < o.id
                                      AND p.delivered_at IS NULL AND p.failed_at IS NULL)
                    AND (o.job_id IS NOT NULL OR o.batch_id IS NULL
                         OR NOT EXISTS (SELECT 1 FROM outbox p WHERE p.batch_id = o.batch_id AND p.id < o.id
                                          AND p.delivered_at IS NULL AND p.failed_at IS NULL))
                  ORDER BY o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED)
     RETURNING id, event_id, type, target_enc, job_id, batch_id, chat_key_id, payload, attempts, redeliveries, channel,
               coalesce((SELECT j.api_key_id FROM jobs j WHERE j.id = outbox.job_id),
                        (SELECT b.api_key_id FROM batches b WHERE b.id = outbox.batch_id)) AS api_key_id`,
    [opts.batch, opts.leaseSeconds, opts.channels ?? OUTBOX_CHANNELS]);
  return r.rows;
}

/**
 * Give back a claimed event that was not sent (its receiver had enough in
 * flight): the attempt counted at the claim is taken back, and the event is
 * due again after `delayMs`, leaving the next claims to other receivers.
 */
export async function releaseClaim(pool: pg.Pool, id: string, delayMs: number): Promise<void> {
  await pool.query(`UPDATE outbox SET attempts = attempts - 1, next_attempt_at = now() + make_interval(secs => $2) WHERE id = $1`,
    [id, delayMs / 1000]);
}

export async function markDelivered(pool: pg.Pool, id: string): Promise<void> {
  await pool.query('UPDATE outbox SET delivered_at = now(), last_error = NULL WHERE id = $1', [id]);
}

/**
 * No more attempts: the event stays failed. Without `error` (an attempt a
 * crash cut short, outcome unknown) the last recorded error stays, else
 * 'interrupted'.
 */
export async function markFailed(pool: pg.Pool, id: string, error?: string): Promise<void> {
  await pool.query(`UPDATE outbox SET failed_at = now(), last_error = coalesce($2, last_error, 'interrupted') WHERE id = $1`,
    [id, error ?? null]);
}

/** The attempt failed: try again after `delayMs` (the lease set at the claim is replaced). */
export async function scheduleRetry(pool: pg.Pool, id: string, error: string, delayMs: number): Promise<void> {
  await pool.query(`UPDATE outbox SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3) WHERE id = $1`,
    [id, error, delayMs / 1000]);
}

/** A job's event as GET /jobs/{id}/webhooks shows it: never the payload (it holds download URLs) or the target. */
export interface JobEvent {
  id: string;
  event_id: string;
  type: string;
  stage: string | null;
  created_at: Date;
  delivered_at: Date | null;
  failed_at: Date | null;
  last_error: string | null;
  attempts: number;
  redeliveries: number;
}

const JOB_EVENT_COLUMNS = `id::text, event_id, type, payload->>'stage' AS stage, created_at, delivered_at, failed_at, last_error, attempts, redeliveries`;

/** The job's events in the order they were queued (and are delivered). */
export async function jobEvents(pool: pg.Pool, jobId: string): Promise<JobEvent[]> {
  const r = await pool.query<JobEvent>(`SELECT ${JOB_EVENT_COLUMNS} FROM outbox WHERE job_id = $1 ORDER BY id`, [jobId]);
  return r.rows;
}

/**
 * Send a job's delivered or failed event again, with the same event id and
 * a fresh round of attempts. An event still being delivered is left as it
 * is ('open'); 'unknown' when the job has no such event.
 */
export async function redeliverEvent(
  pool: pg.Pool, jobId: string, eventUuid: string,
): Promise<{ outcome: 'queued'; event: JobEvent } | { outcome: 'open' | 'unknown' }> {
  const r = await pool.query<JobEvent>(
    `UPDATE outbox SET attempts = 0, delivered_at = NULL, failed_at = NULL, last_error = NULL, next_attempt_at = now(),
            redeliveries = redeliveries + 1
      WHERE job_id = $1 AND event_id = $2::uuid AND (delivered_at IS NOT NULL OR failed_at IS NOT NULL)
      RETURNING ${JOB_EVENT_COLUMNS}`,
    [jobId, eventUuid]);
  if (r.rows[0]) {
    await pool.query(`NOTIFY ${OUTBOX_CHANNEL}`);
    return { outcome: 'queued', event: r.rows[0] };
  }
  const exists = await pool.query('SELECT 1 FROM outbox WHERE job_id = $1 AND event_id = $2::uuid', [jobId, eventUuid]);
  return { outcome: exists.rowCount ? 'open' : 'unknown' };
}

/**
 * Per channel, the age in seconds of the oldest event neither delivered
 * nor given up (a redelivered event counts from its creation). Reads only
 * the undelivered rows, through the partial index outbox_due_idx.
 */
export async function oldestUndelivered(pool: pg.Pool): Promise<Map<OutboxChannel, number>> {
  const r = await pool.query<{ channel: OutboxChannel; age: number }>({
    name: 'mj-outbox-oldest',
    text: `SELECT channel, extract(epoch FROM now() - min(created_at))::float8 AS age FROM outbox
           WHERE delivered_at IS NULL AND failed_at IS NULL GROUP BY channel`,
  });
  return new Map(r.rows.map((row) => [row.channel, Math.max(0, row.age)]));
}
