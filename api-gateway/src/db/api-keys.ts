// Organizations and API keys, and the end users of marketplace keys (rows
// of api_keys too: migration 0011, ADR 0015). Keys are stored only as
// sha256 hex; the key text exists once, in the admin CLI's output.
import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';

/** Keys that authenticate: a client's own (`direct`), or a provider account's used through an API marketplace. */
export type KeyKind = 'direct' | 'marketplace';

export interface ApiKeyRecord {
  id: string;
  /** The name given at creation: GET /usage's client_name. */
  name: string;
  organizationId: string | null;
  revoked: boolean;
  /** Absent: `direct` (stand-in records in tests); a stored key always says. */
  kind?: KeyKind;
  storageLimitBytes: number | null;
  maxResolution: string | null;
  maxDurationSeconds: number | null;
  maxFilesizeBytes: number | null;
  /** The Stripe customer the key's usage is billed to (migration 0012); absent in stand-in records. */
  billingCustomer?: string | null;
}

export interface ApiKeyListing {
  id: string;
  name: string;
  kind: KeyKind;
  /** A marketplace key's end users seen so far; 0 for a direct key. */
  endUsers: number;
  organizationId: string | null;
  keyPrefix: string;
  createdAt: Date;
  revokedAt: Date | null;
  storageLimitBytes: number | null;
  maxResolution: string | null;
  maxDurationSeconds: number | null;
  maxFilesizeBytes: number | null;
  billingCustomer: string | null;
}

export interface NewApiKey {
  name: string;
  /** Default `direct`. */
  kind?: KeyKind;
  organizationId?: string;
  storageLimitBytes?: number;
  maxResolution?: string;
  maxDurationSeconds?: number;
  maxFilesizeBytes?: number;
  /** A Stripe customer id (cus_…): the key is billed through Stripe. */
  billingCustomer?: string;
  /** Use this key text instead of a random one (e.g. a fixed dev key). */
  key?: string;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** `mj_` + 32 random bytes, base64url: 256 bits, and the prefix makes leaked keys easy to scan for. */
export function generateApiKey(): string {
  return `mj_${randomBytes(32).toString('base64url')}`;
}

const num = (v: string | number | null): number | null => (v === null ? null : Number(v));

type ApiKeyRow = {
  id: string; name: string; organization_id: string | null; revoked: boolean; kind: KeyKind; storage_limit_bytes: string | null;
  max_resolution: string | null; max_duration_seconds: number | null; max_filesize_bytes: string | null; billing_customer: string | null;
};

const KEY_COLUMNS = `id, name, organization_id, revoked_at IS NOT NULL AS revoked, kind, storage_limit_bytes, max_resolution,
                  max_duration_seconds, max_filesize_bytes, billing_customer`;

function keyRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    organizationId: row.organization_id,
    revoked: row.revoked,
    kind: row.kind,
    storageLimitBytes: num(row.storage_limit_bytes),
    maxResolution: row.max_resolution,
    maxDurationSeconds: row.max_duration_seconds,
    maxFilesizeBytes: num(row.max_filesize_bytes),
    billingCustomer: row.billing_customer,
  };
}

/**
 * The key a hash belongs to. End users' rows never match: their key_hash is
 * not a sha256 hex (migration 0011), and the kind is checked besides.
 */
export async function findApiKeyByHash(pool: pg.Pool, keyHash: string): Promise<ApiKeyRecord | undefined> {
  const r = await pool.query<ApiKeyRow>({
    name: 'mj-api-key-by-hash',
    text: `SELECT ${KEY_COLUMNS}
             FROM api_keys WHERE key_hash = $1 AND kind <> 'end_user'`,
    values: [keyHash],
  });
  const row = r.rows[0];
  return row && keyRecord(row);
}

/** The keys of several hashes in one statement (auth.ts SharedKeyLookup), by hash; a hash of no key is absent. */
export async function findApiKeysByHashes(pool: pg.Pool, keyHashes: readonly string[]): Promise<Map<string, ApiKeyRecord>> {
  const r = await pool.query<ApiKeyRow & { key_hash: string }>({
    name: 'mj-api-keys-by-hashes',
    text: `SELECT key_hash, ${KEY_COLUMNS}
             FROM api_keys WHERE key_hash = ANY($1::text[]) AND kind <> 'end_user'`,
    values: [keyHashes],
  });
  return new Map(r.rows.map((row) => [row.key_hash, keyRecord(row)]));
}

export async function createOrganization(pool: pg.Pool, name: string): Promise<{ id: string }> {
  const r = await pool.query('INSERT INTO organizations (name) VALUES ($1) RETURNING id', [name]);
  return { id: (r.rows[0] as { id: string }).id };
}

/**
 * Create a key; returns its id and the key text (the only time it exists).
 * With a given `key` that is already stored, returns the existing id and
 * `created: false`, so a fixed dev key can be ensured on every start.
 */
export async function createApiKey(pool: pg.Pool, k: NewApiKey): Promise<{ id: string; key: string; created: boolean }> {
  const key = k.key ?? generateApiKey();
  const r = await pool.query(
    `INSERT INTO api_keys (organization_id, name, key_hash, key_prefix, storage_limit_bytes, max_resolution,
                           max_duration_seconds, max_filesize_bytes, kind, billing_customer)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (key_hash) DO NOTHING
     RETURNING id`,
    [
      k.organizationId ?? null, k.name, hashApiKey(key), key.slice(0, 8), k.storageLimitBytes ?? null,
      k.maxResolution ?? null, k.maxDurationSeconds ?? null, k.maxFilesizeBytes ?? null, k.kind ?? 'direct',
      k.billingCustomer ?? null,
    ],
  );
  if (r.rows[0]) return { id: (r.rows[0] as { id: string }).id, key, created: true };
  const existing = await pool.query('SELECT id FROM api_keys WHERE key_hash = $1', [hashApiKey(key)]);
  return { id: (existing.rows[0] as { id: string }).id, key, created: false };
}

/** Returns false when no such key exists; revoking twice keeps the first time. */
export async function revokeApiKey(pool: pg.Pool, id: string): Promise<boolean> {
  const r = await pool.query('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1', [id]);
  return (r.rowCount ?? 0) > 0;
}

/** The keys (not the end users, counted on their marketplace key). Never returns hashes or keys: only the human prefix. */
export async function listApiKeys(pool: pg.Pool): Promise<ApiKeyListing[]> {
  const r = await pool.query(
    `SELECT id, name, kind, organization_id, key_prefix, created_at, revoked_at, storage_limit_bytes, max_resolution,
            max_duration_seconds, max_filesize_bytes, billing_customer,
            (SELECT count(*) FROM api_keys u WHERE u.parent_id = k.id)::int AS end_users
       FROM api_keys k WHERE kind <> 'end_user' ORDER BY created_at, id`,
  );
  return (r.rows as {
    id: string; name: string; kind: KeyKind; end_users: number; organization_id: string | null; key_prefix: string; created_at: Date;
    revoked_at: Date | null; storage_limit_bytes: string | null; max_resolution: string | null; max_duration_seconds: number | null;
    max_filesize_bytes: string | null; billing_customer: string | null;
  }[]).map((row) => ({
    id: row.id,
    name: row.name,
    kind: row.kind,
    endUsers: row.end_users,
    organizationId: row.organization_id,
    keyPrefix: row.key_prefix,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
    storageLimitBytes: num(row.storage_limit_bytes),
    maxResolution: row.max_resolution,
    maxDurationSeconds: row.max_duration_seconds,
    maxFilesizeBytes: num(row.max_filesize_bytes),
    billingCustomer: row.billing_customer,
  }));
}

/** An end user of a marketplace key, as authentication needs it. */
export interface EndUserRecord {
  id: string;
  revoked: boolean;
}

/**
 * The end user `user` of marketplace key `parentId`, created on first
 * sight. Looked up first (the common case, one index read); a new one is
 * inserted with its key's name (GET /usage's client_name names the
 * provider's integration, never the user), and when a concurrent request
 * inserted it first, the no-op update of ON CONFLICT returns that row.
 * Throws when `parentId` is not a marketplace key.
 */
export async function endUserOf(pool: pg.Pool, parentId: string, user: string): Promise<EndUserRecord> {
  const found = await pool.query<EndUserRecord>({
    name: 'mj-end-user',
    text: 'SELECT id, revoked_at IS NOT NULL AS revoked FROM api_keys WHERE parent_id = $1 AND marketplace_user = $2',
    values: [parentId, user],
  });
  if (found.rows[0]) return found.rows[0];
  const made = await pool.query<EndUserRecord>({
    name: 'mj-end-user-create',
    text: `INSERT INTO api_keys (kind, parent_id, marketplace_user, name, key_hash, key_prefix)
           SELECT 'end_user', p.id, $2, p.name, 'end-user:' || gen_random_uuid(), '' FROM api_keys p WHERE p.id = $1 AND p.kind = 'marketplace'
           ON CONFLICT (parent_id, marketplace_user) DO UPDATE SET parent_id = EXCLUDED.parent_id
           RETURNING id, revoked_at IS NOT NULL AS revoked`,
    values: [parentId, user],
  });
  if (!made.rows[0]) throw new Error(`api key ${parentId} is not a marketplace key`);
  return made.rows[0];
}
