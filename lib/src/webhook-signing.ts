// The Standard Webhooks wire format of a delivery's signature
// (https://www.standardwebhooks.com, spec "Signature scheme"): secrets,
// the signed content and the three headers. Pure; the secrets' storage is
// lib/src/db/webhook-secrets.ts's, sending is operator/src/outbox.ts's.
import { createHmac, randomBytes } from 'node:crypto';

/** The spec's prefix of a symmetric secret: `whsec_` + base64 of the key bytes. */
export const SECRET_PREFIX = 'whsec_';

/** How long a rotated-out secret still signs deliveries beside the new one. */
export const ROTATION_OVERLAP_SECONDS = 24 * 3600;

/** A fresh secret: 32 random bytes (the spec asks for 24 to 64). */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** The HMAC key of a `whsec_` secret: the bytes its base64 stands for. */
export function secretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('not a whsec_ secret');
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  if (!key.length) throw new Error('empty webhook secret');
  return key;
}

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` for one key. */
export function signature(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The headers of one attempt: one signature per key, space-separated, newest first. */
export function signedHeaders(keys: readonly Buffer[], id: string, timestamp: number, body: string): Record<string, string> {
  const headers: Record<string, string> = { 'webhook-id': id, 'webhook-timestamp': String(timestamp) };
  if (keys.length) headers['webhook-signature'] = keys.map((k) => signature(k, id, timestamp, body)).join(' ');
  return headers;
}
