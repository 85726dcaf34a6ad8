// The webhook event types a job or batch can send, and the request field
// that chooses among them (`webhook_events`, as Replicate's events filter):
// docs/adr/0029-every-outcome-has-a-webhook.md. The payloads are built
// elsewhere (operator/src/webhook-events.ts, lib/src/job-cancellation.ts,
// lib/src/db/batches.ts); the outbox (lib/src/db/outbox.ts) queues only the
// events a job's or batch's filter names, so every way an event is queued
// obeys it.

/** Every event type, in the order a job meets them. */
export const WEBHOOK_EVENT_TYPES = [
  'job_processing', 'progress', 'job_completed', 'job_failed', 'job_warning', 'job_skipped', 'job_cancelled', 'batch_completed',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The events that end a job: exactly one of them is sent for each job that ends (Completed, Failed, Warning, Skipped, cancelled). */
export const TERMINAL_EVENT_TYPES: readonly WebhookEventType[] = ['job_completed', 'job_failed', 'job_warning', 'job_skipped', 'job_cancelled'];

/**
 * Whether a job (or batch) whose filter is `filter` sends events of `type`.
 * No filter (null: the request named none) sends every type (ADR 0029);
 * progress events still need enable_progress_webhook.
 */
export function sendsEvent(filter: readonly string[] | null | undefined, type: string): boolean {
  return !filter || filter.includes(type);
}
