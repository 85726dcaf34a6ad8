// Saved destinations in Postgres (table storage_destinations, migration
// 0002): what the API may show about each one, where its credentials are
// (a Secret name, or a sealed column), and rule 9 of POST /jobs as two
// indexed queries that the job insert embeds.
import type { StorageProviderName } from '@mediajobs/lib/mediajob/types';
import type pg from 'pg';
import { withTransaction } from '@mediajobs/lib/pg-client';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import type { Sealable } from '@mediajobs/lib/secret-box';
import type { Owner } from './vault.js';

export type Source = 'keyvault' | 'legacy';

export interface SavedDestination {
  id: string;
  ownerKind: Owner['kind'];
  ownerId: string;
  provider: StorageProviderName;
  source: Source;
  /** Non-secret fields only (see fields.ts publicConfig). */
  config: Record<string, unknown>;
  secretName: string | null;
  credentialsEnc: string | null;
  isDefault: boolean;
  updatedAt: Date;
}

interface Row {
  id: string; owner_kind: Owner['kind']; owner_id: string; provider: StorageProviderName; source: Source;
  config: Record<string, unknown>; secret_name: string | null; credentials_enc: string | null; is_default: boolean; updated_at: Date;
}

const COLUMNS = 'id, owner_kind, owner_id, provider, source, config, secret_name, credentials_enc, is_default, updated_at';

function fromRow(r: Row): SavedDestination {
  return {
    id: r.id, ownerKind: r.owner_kind, ownerId: r.owner_id, provider: r.provider, source: r.source, config: r.config,
    secretName: r.secret_name, credentialsEnc: r.credentials_enc, isDefault: r.is_default, updatedAt: r.updated_at,
  };
}

export interface NewDestination {
  owner: Owner;
  provider: StorageProviderName;
  source: Source;
  config: Record<string, unknown>;
  secretName?: string;
  /** A legacy row's credentials, sealed here for the row's natural key (lib/src/db/sealed-columns.ts). */
  credentials?: Sealable;
  /** true: make this the owner's default (rule 9), clearing the mark elsewhere; false: unmark; absent: keep as it was. */
  isDefault?: boolean;
}

/**
 * Insert or replace the owner's destination for this provider and source.
 * An update keeps the row's id, so jobs already resolved to it follow the
 * new credentials; `updated_at` moves, which makes it "most recently saved".
 */
export async function saveDestination(pool: pg.Pool, d: NewDestination): Promise<SavedDestination> {
  return withTransaction(pool, async (client) => {
    if (d.isDefault === true) {
      await client.query('UPDATE storage_destinations SET is_default = false WHERE owner_kind = $1 AND owner_id = $2 AND is_default',
        [d.owner.kind, d.owner.id]);
    }
    const r = await client.query<Row>(
      `INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, secret_name, credentials_enc, is_default)
       VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, false))
       ON CONFLICT (owner_kind, owner_id, provider, source) DO UPDATE
         SET config = EXCLUDED.config, secret_name = EXCLUDED.secret_name, credentials_enc = EXCLUDED.credentials_enc,
             is_default = COALESCE($8, storage_destinations.is_default),
             updated_at = clock_timestamp()
       RETURNING ${COLUMNS}`,
      [d.owner.kind, d.owner.id, d.provider, d.source, JSON.stringify(d.config), d.secretName ?? null,
        d.credentials?.(sealedAt.destinationCredentials({ owner_kind: d.owner.kind, owner_id: d.owner.id, provider: d.provider })) ?? null,
        d.isDefault ?? null],
    );
    return fromRow(r.rows[0]!);
  });
}

/** The owner's destinations of one provider, keyvault first (it wins when both exist). */
export async function findDestinations(pool: pg.Pool, owner: Owner, provider: StorageProviderName): Promise<SavedDestination[]> {
  const r = await pool.query<Row>(
    `SELECT ${COLUMNS} FROM storage_destinations WHERE owner_kind = $1 AND owner_id = $2 AND provider = $3
     ORDER BY (source = 'keyvault') DESC`,
    [owner.kind, owner.id, provider],
  );
  return r.rows.map(fromRow);
}

/** Delete the owner's destination of this provider (one source, or both); returns what was deleted. */
export async function deleteDestinations(
  pool: pg.Pool, owner: Owner, provider: StorageProviderName, source?: Source,
): Promise<SavedDestination[]> {
  const r = await pool.query<Row>(
    `DELETE FROM storage_destinations WHERE owner_kind = $1 AND owner_id = $2 AND provider = $3 AND ($4::text IS NULL OR source = $4)
     RETURNING ${COLUMNS}`,
    [owner.kind, owner.id, provider, source ?? null],
  );
  return r.rows.map(fromRow);
}

// Rule 9 as SQL, placed into POST /jobs' insert (lib/src/db/jobs.ts jobInserter, bound in routes/jobs.ts) so that a job
// costs one round trip however its destination is found. The arguments are
// the placeholders of the key id, its organization id and the provider.

/** With `storage_provider`: the key's destination of that provider, else its organization's; for one owner, keyvault before legacy. */
export const resolveByProviderSql = (key: string, org: string, provider: string) => `SELECT ${COLUMNS} FROM storage_destinations
  WHERE ((owner_kind = 'api_key' AND owner_id = ${key}) OR (owner_kind = 'organization' AND owner_id = ${org})) AND provider = ${provider}
  ORDER BY (owner_kind = 'api_key') DESC, (source = 'keyvault') DESC
  LIMIT 1`;

/**
 * Without it: the key's default destination (the one marked default, else
 * the most recently saved), else the organization's. Each provider first
 * collapses to its effective row (keyvault wins), so a stale legacy row
 * saved later cannot shadow the keyvault one.
 */
export const resolveDefaultSql = (key: string, org: string) => `SELECT ${COLUMNS} FROM (
    SELECT DISTINCT ON (owner_kind, provider) ${COLUMNS} FROM storage_destinations
    WHERE (owner_kind = 'api_key' AND owner_id = ${key}) OR (owner_kind = 'organization' AND owner_id = ${org})
    ORDER BY owner_kind, provider, (source = 'keyvault') DESC
  ) effective
  ORDER BY (owner_kind = 'api_key') DESC, is_default DESC, updated_at DESC
  LIMIT 1`;

/**
 * The provider of the key's own default destination (rule 9 without
 * `storage_provider`, the organization's left out), or undefined when the
 * key has none: a marketplace end user's jobs use only what it saved.
 */
export async function ownDefaultProvider(pool: pg.Pool, apiKeyId: string): Promise<StorageProviderName | undefined> {
  const r = await pool.query<{ provider: StorageProviderName }>({
    name: 'mj-own-default-provider',
    text: `SELECT provider FROM (${resolveDefaultSql('$1', 'NULL::uuid')}) own`,
    values: [apiKeyId],
  });
  return r.rows[0]?.provider;
}

/** Whether the key may manage its organization's destinations. */
export async function isOrgAdmin(pool: pg.Pool, apiKeyId: string): Promise<boolean> {
  const r = await pool.query<{ org_admin: boolean }>('SELECT org_admin FROM api_keys WHERE id = $1', [apiKeyId]);
  return r.rows[0]?.org_admin === true;
}

/** Grant or withdraw organization admin (admin CLI). False when no such key; a key without an organization cannot be one. */
export async function setOrgAdmin(pool: pg.Pool, apiKeyId: string, on: boolean): Promise<'ok' | 'no_such_key' | 'no_organization'> {
  const r = await pool.query<{ organization_id: string | null }>(
    `UPDATE api_keys SET org_admin = $2 AND organization_id IS NOT NULL WHERE id = $1 RETURNING organization_id`, [apiKeyId, on]);
  if (!r.rows[0]) return 'no_such_key';
  return on && r.rows[0].organization_id === null ? 'no_organization' : 'ok';
}
