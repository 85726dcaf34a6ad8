// Verification of a webhook delivery, after the Standard Webhooks spec
// (standardwebhooks.com, "Verifying webhooks"): the HMAC-SHA256 of
// `<webhook-id>.<webhook-timestamp>.<raw body>` under the `whsec_` secret,
// any of the space-separated `v1,<base64>` signatures matching (the service
// signs with the old and the new secret for 24 h after a rotation), compared
// in constant time, and a timestamp within the tolerance of now (replays).
// The operator's signer is lib/src/webhook-signing.ts; the test checks
// this against it and against the `standardwebhooks` package.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookVerificationError } from './errors.js';
import type { WebhookEvent } from './types.js';

/** The spec's default: five minutes either side of now. */
export const DEFAULT_TOLERANCE_SECONDS = 5 * 60;
const SECRET_PREFIX = 'whsec_';

/** Request headers as Node (IncomingHttpHeaders), fetch (Headers) or a plain record give them. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far the delivery's timestamp may be from now, in seconds. */
  toleranceSeconds?: number;
  /** Now, in milliseconds since the epoch (tests). */
  now?: number;
}

/**
 * The delivery's event when one of its signatures is by one of `secrets`
 * (a `whsec_` secret as POST /user/webhook-secret shows it; give the old and
 * the new during a rotation of your own); else WebhookVerificationError.
 * `rawBody` is the body exactly as received: parsing and re-serialising
 * JSON changes the bytes and so the signature.
 */
export function verifyWebhook(headers: WebhookHeaders, rawBody: string | Uint8Array, secrets: string | readonly string[], options: VerifyOptions = {}): WebhookEvent {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('Missing webhook-id, webhook-timestamp or webhook-signature header');
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('Invalid webhook-timestamp header');
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((options.now ?? Date.now()) / 1000);
  const sentAt = Number(timestamp);
  if (sentAt < nowSeconds - tolerance) throw new WebhookVerificationError('Message timestamp too old');
  if (sentAt > nowSeconds + tolerance) throw new WebhookVerificationError('Message timestamp too new');

  const body = typeof rawBody === 'string' ? Buffer.from(rawBody) : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]);
  const expected = (Array.isArray(secrets) ? secrets : [secrets] as readonly string[]).map((s) => createHmac('sha256', secretKey(s)).update(signed).digest());
  const matches = signatures.split(' ').some((entry) => {
    const [version, value] = entry.split(',', 2);
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return expected.some((e) => e.length === given.length && timingSafeEqual(e, given));
  });
  if (!matches) throw new WebhookVerificationError('No matching signature found');
  try {
    return JSON.parse(body.toString('utf8')) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('The body is not JSON');
  }
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value.join(' ') : value;
}

/** The HMAC key: the base64 after `whsec_` (the prefix is optional, as the spec's libraries accept). */
function secretKey(secret: string): Buffer {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  if (!key.length) throw new WebhookVerificationError('Empty webhook secret');
  return key;
}
