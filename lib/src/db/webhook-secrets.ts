// The webhook_secrets table: each API key's webhook signing secret, sealed
// with the SecretBox. This module owns every statement on it: the gateway's
// reveal-and-rotate and metadata read (api-gateway/src/routes/webhooks.ts)
// and the operator's read of the keys to sign with, which also creates a
// key's secret on its first delivery (operator/src/outbox.ts). It lives in
// lib because both processes use it. The format of a secret is
// lib/src/webhook-signing.ts's.
import type pg from 'pg';
import { withTransaction } from '../pg-client.js';
import { SecretBoxError, type SecretBox } from '../secret-box.js';
import { ROTATION_OVERLAP_SECONDS, generateSecret } from '../webhook-signing.js';
import { sealedAt } from './sealed-columns.js';

/** What GET /user/webhook-secret may show: never the secret. */
export interface WebhookSecretInfo {
  /** A secret was revealed by POST /user/webhook-secret (a first-delivery secret is not). */
  revealed: boolean;
  createdAt: Date;
  rotatedAt: Date | null;
  /** Until when the replaced secret still signs; null when none does. */
  previousExpiresAt: Date | null;
}

const INFO_COLUMNS = `revealed, created_at, rotated_at,
  CASE WHEN rotated_at > now() - make_interval(secs => ${ROTATION_OVERLAP_SECONDS})
       THEN rotated_at + make_interval(secs => ${ROTATION_OVERLAP_SECONDS}) END AS previous_expires_at`;

interface InfoRow { revealed: boolean; created_at: Date; rotated_at: Date | null; previous_expires_at: Date | null }

const info = (r: InfoRow): WebhookSecretInfo =>
  ({ revealed: r.revealed, createdAt: r.created_at, rotatedAt: r.rotated_at, previousExpiresAt: r.previous_expires_at });

/**
 * A new secret for the key, returned for the one time it is shown. A
 * revealed secret it replaces keeps signing for ROTATION_OVERLAP_SECONDS (a
 * second rotation within them ends the older one's overlap); one nobody was
 * shown is dropped at once. The replaced secret moves to the other column,
 * so it is opened and sealed again for that place, under the row's lock.
 */
export async function rotateWebhookSecret(pool: pg.Pool, box: SecretBox, apiKeyId: string): Promise<{ secret: string; info: WebhookSecretInfo }> {
  const secret = generateSecret();
  const sealed = box.seal(secret, sealedAt.signingSecret(apiKeyId));
  for (;;) {
    const row = await withTransaction(pool, async (client) => {
      const old = (await client.query<{ secret_enc: string; revealed: boolean }>(
        'SELECT secret_enc, revealed FROM webhook_secrets WHERE api_key_id = $1 FOR UPDATE', [apiKeyId])).rows[0];
      if (!old) {
        return (await client.query<InfoRow>(
          `INSERT INTO webhook_secrets (api_key_id, secret_enc, revealed, created_at) VALUES ($1, $2, true, now())
           ON CONFLICT (api_key_id) DO NOTHING RETURNING ${INFO_COLUMNS}`, [apiKeyId, sealed])).rows[0];
      }
      const previous = old.revealed ? movedToPrevious(box, apiKeyId, old.secret_enc) : null;
      return (await client.query<InfoRow>(
        `UPDATE webhook_secrets SET previous_secret_enc = $3, rotated_at = CASE WHEN $3::text IS NOT NULL THEN now() END,
                secret_enc = $2, revealed = true, created_at = now()
          WHERE api_key_id = $1 RETURNING ${INFO_COLUMNS}`, [apiKeyId, sealed, previous])).rows[0];
    });
    // Undefined: a concurrent first secret (a reveal or a first delivery) won the insert; rotate that one.
    if (row) return { secret, info: info(row) };
  }
}

/**
 * The replaced secret sealed for previous_secret_enc; null when it does not
 * open (a removed key, a damaged or moved value): it could not sign either,
 * and the rotation is how its owner gets past it.
 */
function movedToPrevious(box: SecretBox, apiKeyId: string, sealed: string): string | null {
  try {
    return box.seal(box.open(sealed, sealedAt.signingSecret(apiKeyId)), sealedAt.previousSigningSecret(apiKeyId));
  } catch (err) {
    if (err instanceof SecretBoxError) return null;
    throw err;
  }
}

export async function webhookSecretInfo(pool: pg.Pool, apiKeyId: string): Promise<WebhookSecretInfo | undefined> {
  const r = await pool.query<InfoRow>(`SELECT ${INFO_COLUMNS} FROM webhook_secrets WHERE api_key_id = $1`, [apiKeyId]);
  return r.rows[0] && info(r.rows[0]);
}

/**
 * The secrets a delivery of this key is signed with, newest first: the
 * current one, and the one it replaced while that is within its overlap. A
 * key without a secret gets one now (not revealed: POST
 * /user/webhook-secret shows a new one), so every delivery is signed.
 */
export async function signingSecrets(pool: pg.Pool, box: SecretBox, apiKeyId: string): Promise<string[]> {
  const select = `SELECT secret_enc,
      CASE WHEN rotated_at > now() - make_interval(secs => ${ROTATION_OVERLAP_SECONDS}) THEN previous_secret_enc END AS previous_enc
    FROM webhook_secrets WHERE api_key_id = $1`;
  type Row = { secret_enc: string; previous_enc: string | null };
  let row = (await pool.query<Row>(select, [apiKeyId])).rows[0];
  if (!row) {
    // A concurrent reveal or first delivery may win the insert; the SELECT after it reads whichever did.
    await pool.query(`INSERT INTO webhook_secrets (api_key_id, secret_enc, revealed) VALUES ($1, $2, false) ON CONFLICT (api_key_id) DO NOTHING`,
      [apiKeyId, box.seal(generateSecret(), sealedAt.signingSecret(apiKeyId))]);
    row = (await pool.query<Row>(select, [apiKeyId])).rows[0]!;
  }
  return [
    box.open(row.secret_enc, sealedAt.signingSecret(apiKeyId)),
    ...(row.previous_enc ? [box.open(row.previous_enc, sealedAt.previousSigningSecret(apiKeyId))] : []),
  ];
}
