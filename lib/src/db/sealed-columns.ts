// Every column holding SecretBox values, and the place (table, column, row)
// each value is bound to: the one list the openers, the sealers and the
// re-seal command (./reseal.ts) share, so a new sealed column is added here
// or nowhere. Which module writes each column is unchanged (./jobs.ts,
// ./batches.ts, ./outbox.ts, ./chat-settings.ts, ./webhook-secrets.ts, the
// gateway's destinations/store.ts).
//
// Most values are bound to their own row. Two kinds of row hold copies made
// in SQL, where no key is at hand, and are bound to the value they copy:
// - outbox.target_enc copies a job's, a batch's or a chat setting's address
//   in the transaction that queues the event; it opens with that origin's
//   place, named by the ids the outbox row carries (job_id, batch_id,
//   chat_key_id). Rows from before chat_key_id are v1 values and, after
//   the re-seal, bound to the outbox row itself.
// - none else: a bulk request's jobs and a batch's episodes are sealed once
//   per row (docs/adr/0020-sealed-values-bound-to-their-place.md).
//
// Saved destinations are bound to their natural key (owner kind, owner id,
// provider): the upsert that writes them keeps an existing row's id, which
// the sealer cannot know beforehand, and that key is as unique as the id.
import type { SecretContext } from '../secret-box.js';

const place = (table: string, column: string) => (row: string): SecretContext => ({ table, column, row });

/** Places of every sealed value, by table and column. */
export const sealedAt = {
  jobWebhook: place('jobs', 'webhook_url_enc'),
  jobStorage: place('jobs', 'storage_enc'),
  jobResultUrls: place('jobs', 'result_urls_enc'),
  batchWebhook: place('batches', 'webhook_url_enc'),
  chatWebhook: place('chat_settings', 'webhook_url_enc'),
  signingSecret: place('webhook_secrets', 'secret_enc'),
  previousSigningSecret: place('webhook_secrets', 'previous_secret_enc'),
  destinationCredentials: (d: { owner_kind: string; owner_id: string; provider: string }) =>
    place('storage_destinations', 'credentials_enc')(`${d.owner_kind}/${d.owner_id}/${d.provider}`),
  ownOutboxTarget: place('outbox', 'target_enc'),
};

/** What an outbox row says about where its target was copied from. */
export interface OutboxOrigin {
  id: string;
  job_id: string | null;
  batch_id: string | null;
  chat_key_id: string | null;
}

/** The place an outbox row's target opens with: the job's, batch's or chat setting's address it copies. */
export function outboxTargetAt(o: OutboxOrigin): SecretContext {
  if (o.job_id) return sealedAt.jobWebhook(o.job_id);
  if (o.batch_id) return sealedAt.batchWebhook(o.batch_id);
  if (o.chat_key_id) return sealedAt.chatWebhook(o.chat_key_id);
  return sealedAt.ownOutboxTarget(o.id);
}

/** One sealed column as the re-seal command walks it: key order, the row's fields, its place. */
export interface SealedColumn {
  table: string;
  column: string;
  /** The primary key, walked in order (resumable: a batch starts after the last key done), and its SQL type. */
  key: string;
  keyType: 'uuid' | 'bigint';
  /** Further columns the place is computed from. */
  fields: readonly string[];
  at(row: Record<string, string | null>): SecretContext;
}

const own = (table: string, column: string, key: string): SealedColumn =>
  ({ table, column, key, keyType: 'uuid', fields: [], at: (r) => place(table, column)(r[key]!) });

export const SEALED_COLUMNS: readonly SealedColumn[] = [
  own('jobs', 'webhook_url_enc', 'id'),
  own('jobs', 'storage_enc', 'id'),
  own('jobs', 'result_urls_enc', 'id'),
  own('batches', 'webhook_url_enc', 'id'),
  own('chat_settings', 'webhook_url_enc', 'api_key_id'),
  own('webhook_secrets', 'secret_enc', 'api_key_id'),
  own('webhook_secrets', 'previous_secret_enc', 'api_key_id'),
  {
    table: 'storage_destinations', column: 'credentials_enc', key: 'id', keyType: 'uuid', fields: ['owner_kind', 'owner_id', 'provider'],
    at: (r) => sealedAt.destinationCredentials(r as { owner_kind: string; owner_id: string; provider: string }),
  },
  {
    table: 'outbox', column: 'target_enc', key: 'id', keyType: 'bigint', fields: ['job_id', 'batch_id', 'chat_key_id'],
    at: (r) => outboxTargetAt(r as unknown as OutboxOrigin),
  },
];
