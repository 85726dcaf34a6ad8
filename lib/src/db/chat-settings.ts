// The chat_settings table: each API key's chat notification (POST, GET and
// DELETE /user/chat) and the lookup that queues a failed job's notification
// in the transaction recording the failure (./jobs.ts). The address is
// sealed here for the key's row (./sealed-columns.ts); nothing here opens it.
import type pg from 'pg';
import { chatNotification, severityOf, type EndedJob, type NotifyLevel } from '../chat/notification.js';
import { queueChatNotification } from './outbox.js';
import { sealedAt } from './sealed-columns.js';
import type { Sealable } from '../secret-box.js';

export interface ChatSetting {
  /** The incoming-webhook address, sealed with the SecretBox for the key's row. */
  webhookUrlEnc: string;
  notifyLevel: NotifyLevel;
  createdAt: number;
  updatedAt: number;
}

/** Save or replace the key's setting (a second POST replaces the first). */
export async function saveChatSetting(pool: pg.Pool, apiKeyId: string, webhookUrl: Sealable, level: NotifyLevel): Promise<ChatSetting> {
  const r = await pool.query<ChatSetting>(
    `INSERT INTO chat_settings (api_key_id, webhook_url_enc, notify_level) VALUES ($1, $2, $3)
     ON CONFLICT (api_key_id) DO UPDATE SET webhook_url_enc = EXCLUDED.webhook_url_enc,
       notify_level = EXCLUDED.notify_level, updated_at = now()
     RETURNING ${COLUMNS}`, [apiKeyId, webhookUrl(sealedAt.chatWebhook(apiKeyId)), level]);
  return r.rows[0]!;
}

export async function getChatSetting(db: pg.Pool | pg.ClientBase, apiKeyId: string): Promise<ChatSetting | undefined> {
  const r = await db.query<ChatSetting>(`SELECT ${COLUMNS} FROM chat_settings WHERE api_key_id = $1`, [apiKeyId]);
  return r.rows[0];
}

/** Remove the key's setting; false when there was none. */
export async function deleteChatSetting(pool: pg.Pool, apiKeyId: string): Promise<boolean> {
  const r = await pool.query('DELETE FROM chat_settings WHERE api_key_id = $1', [apiKeyId]);
  return (r.rowCount ?? 0) > 0;
}

/**
 * Queue the chat notification of a job's ending, in the transaction that
 * records it (./jobs.ts), when the job's key has a setting whose level asks
 * for it. Endings that never notify cost no query.
 */
export async function queueJobChatNotification(client: pg.ClientBase, apiKeyId: string, job: EndedJob): Promise<void> {
  if (!severityOf(job)) return;
  const setting = await getChatSetting(client, apiKeyId);
  const message = setting && chatNotification(job, setting.notifyLevel);
  if (message) await queueChatNotification(client, job.id, apiKeyId, setting.webhookUrlEnc, message);
}

const COLUMNS = `webhook_url_enc AS "webhookUrlEnc", notify_level AS "notifyLevel",
  floor(extract(epoch FROM created_at) * 1000)::float8 AS "createdAt",
  floor(extract(epoch FROM updated_at) * 1000)::float8 AS "updatedAt"`;
