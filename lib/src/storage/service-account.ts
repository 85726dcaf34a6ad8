// A Google service account key as users hand it to us: the JSON file the
// Cloud console downloads, pasted as (escaped) JSON text or as Base64 of it
// (spec: POST /user/gcs, `service_account_json`).
//
// Only the fields a service-account JWT needs are kept. Everything else in
// the file is dropped on purpose: Google's own libraries warn that a
// credential configuration from an outside source must be validated before
// use, because other credential types (`external_account`, ...) make the
// library fetch URLs or run programs named in the file, and fields such as
// `token_uri` or `universe_domain` would steer our requests to wherever the
// user pointed them.
import { createPrivateKey } from 'node:crypto';
import { inspect } from 'node:util';
import { StorageError } from './types.js';

/** The spec's wording; the gateway returns `message` as it is. */
const PREFIX = 'Invalid service account JSON';

/** Base64 in either alphabet (standard or URL-safe), padding optional. */
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

export class ServiceAccountKey {
  readonly clientEmail: string;
  /** Identifies the key within the account; optional in the file. */
  readonly privateKeyId: string | undefined;
  /** The project the account belongs to (not necessarily the bucket's). */
  readonly projectId: string | undefined;
  // Private, so neither JSON.stringify nor util.inspect nor a logger walking
  // the object can reach the key.
  readonly #privateKey: string;

  constructor(fields: { clientEmail: string; privateKey: string; privateKeyId?: string | undefined; projectId?: string | undefined }) {
    this.clientEmail = fields.clientEmail;
    this.privateKeyId = fields.privateKeyId;
    this.projectId = fields.projectId;
    this.#privateKey = fields.privateKey;
  }

  /** The PEM private key; hand it to a signer, never to a log. */
  get privateKey(): string {
    return this.#privateKey;
  }

  toJSON(): Record<string, unknown> {
    return { clientEmail: this.clientEmail, privateKeyId: this.privateKeyId, projectId: this.projectId };
  }

  [inspect.custom](): string {
    return `ServiceAccountKey { clientEmail: ${JSON.stringify(this.clientEmail)} }`;
  }
}

function invalid(reason: string, detail: string, provider: string): StorageError {
  return new StorageError('invalid_config', reason, `${PREFIX}: ${detail}`, { provider });
}

/** JSON.parse that never throws; its error messages quote the input, so they are not kept. */
function tryJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The JSON object inside `raw`: the JSON text itself, that text escaped once
 * more as a JSON string (what a form or a shell often produces), or Base64
 * (standard or URL-safe alphabet) of either.
 */
function decode(raw: string): unknown {
  const text = raw.trim();
  let value: unknown;
  if (text.startsWith('{') || text.startsWith('"')) {
    value = tryJson(text);
  } else if (BASE64.test(text)) {
    const decoded = Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8').trim();
    if (decoded.startsWith('{') || decoded.startsWith('"')) value = tryJson(decoded);
  }
  // One level of escaping only: a string holding a string holding JSON is not a key file.
  if (typeof value === 'string') value = tryJson(value.trim());
  return value;
}

function text(obj: Record<string, unknown>, field: string): string | undefined {
  const v = obj[field];
  return typeof v === 'string' && v.trim() !== '' ? v : undefined;
}

/**
 * Parse and check `service_account_json`. Throws StorageError
 * `invalid_config` whose message is the spec's
 * (`Invalid service account JSON: missing 'private_key' field`) and whose
 * reason is a token (`missing_private_key`); neither quotes the input.
 */
export function parseServiceAccountJson(raw: unknown, provider = 'gcs'): ServiceAccountKey {
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw invalid('missing_service_account_json', 'service_account_json is required', provider);
  }
  const obj = decode(raw);
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    throw invalid('invalid_service_account_json', 'not JSON or Base64 of JSON', provider);
  }
  const fields = obj as Record<string, unknown>;
  // Key files always carry `type`; anything but a service account key is refused (see the header).
  if (fields.type !== undefined && fields.type !== 'service_account') {
    throw invalid('unsupported_credential_type', "'type' must be 'service_account'", provider);
  }
  const privateKey = text(fields, 'private_key');
  if (!privateKey) throw invalid('missing_private_key', "missing 'private_key' field", provider);
  const clientEmail = text(fields, 'client_email');
  if (!clientEmail) throw invalid('missing_client_email', "missing 'client_email' field", provider);
  if (!/^[^\s@]+@[^\s@]+$/.test(clientEmail)) throw invalid('invalid_client_email', "'client_email' is not an email address", provider);

  // Pasting through a form sometimes leaves the PEM's newlines as literal "\n".
  const pem = privateKey.includes('\\n') && !privateKey.includes('\n') ? privateKey.replace(/\\n/g, '\n') : privateKey;
  try {
    const key = createPrivateKey(pem);
    // Service-account signatures (JWT, signed URLs) are RS256.
    if (key.asymmetricKeyType !== 'rsa') throw new Error('not rsa');
  } catch {
    throw invalid('invalid_private_key', "'private_key' is not an RSA private key in PEM form", provider);
  }
  return new ServiceAccountKey({
    clientEmail,
    privateKey: pem,
    privateKeyId: text(fields, 'private_key_id'),
    projectId: text(fields, 'project_id'),
  });
}
