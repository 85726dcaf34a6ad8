// The idempotency_keys table (migrations 0005, 0009): every statement on it.
// A keyed request that creates something writes its key row, holding the
// answer it is about to give, in the same statement or transaction as what
// it creates (keyLockCte + keyRowCte, or lockKey + insertKeyRow): the jobs
// and their key commit together or not at all, so a retry either finds the
// answer or runs as if the first request never happened. While that
// transaction is open it holds the key's advisory lock, and a duplicate is
// told the first is still in flight instead of waiting (IdempotencyKeyBusy);
// once it committed, a duplicate's key insert fails at once
// (IdempotencyKeyTaken) and it answers from the row. A final answer given
// without creating anything (a 4xx) is stored on its own (storeAnswer).
// What the header means and which answers are final is
// api-gateway/src/idempotency.ts's.
import type pg from 'pg';

/** How long an answer is replayed. */
export const REPLAY_WINDOW_SECONDS = 24 * 60 * 60;
/** Expired rows deleted by one sweep: more than are written between two sweeps (SWEEP_EVERY), so it keeps up. */
const SWEEP_LIMIT = 1000;
/** One keyed request in this many sweeps expired rows, after its answer. */
export const SWEEP_EVERY = 100;

export interface IdempotencyScope {
  apiKeyId: string;
  key: string;
}

export interface StoredAnswer {
  status: number;
  body: unknown;
  location: string | null;
}

/** A key row to write with what a request creates: who, which request, and the answer it will give. */
export interface NewKeyRow extends IdempotencyScope {
  fingerprint: Buffer;
  answer: StoredAnswer;
}

/** The answer a key holds, and the request it answered. */
export interface HeldKey {
  fingerprint: Buffer;
  answer: StoredAnswer;
}

/** The key holds a committed answer: nothing was written; answer from readKey. */
export class IdempotencyKeyTaken extends Error {
  constructor() {
    super('idempotency key already used');
    this.name = 'IdempotencyKeyTaken';
  }
}

/** Another request's transaction holds the key right now: nothing was written; it is still in flight. */
export class IdempotencyKeyBusy extends Error {
  constructor() {
    super('idempotency key held by a request in flight');
    this.name = 'IdempotencyKeyBusy';
  }
}

const COLUMNS = 'api_key_id, key, fingerprint, response_status, response_body, response_location';
const UNIQUE_VIOLATION = '23505';
const PRIMARY_KEY = 'idempotency_keys_pkey';

// The key's transaction-scoped advisory lock, tried, never waited for. A
// 64-bit hash of the scope: a collision costs a spurious 409, nothing more.
const tryLock = (apiKeyId: string, key: string) => `pg_try_advisory_xact_lock(hashtextextended(${apiKeyId}::uuid::text || '/' || ${key}::text, 0))`;

/**
 * The key's advisory lock as the first CTE of an insert statement, named
 * `key_lock` with the column `held`; the statement writes nothing unless
 * `held` (its jobs' WHERE says so) and returns it (see keyHeld).
 */
export function keyLockCte(apiKeyId: string, key: string): string {
  return `key_lock AS (SELECT ${tryLock(apiKeyId, key)} AS held)`;
}

/**
 * The key row as a CTE of an insert statement whose CTE `job` returns the
 * api_key_id of what it wrote: written only when something was, in the same
 * commit. Its values are the parameters from `$first` on, in keyRowValues'
 * order (the key first). A key already answered makes the statement fail
 * with a unique violation, which undoes all of it: see withKeyRow.
 */
export function keyRowCte(first: number): string {
  const p = (i: number) => `$${first + i}`;
  return `idem AS (
  INSERT INTO idempotency_keys (${COLUMNS})
  SELECT api_key_id, ${p(0)}, ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)} FROM job LIMIT 1
)`;
}

/**
 * A key row as one element of a batched insert's JSON input (see
 * keyRowsCte): the same values as keyRowValues, the fingerprint in hex.
 */
export function keyRowDoc(row: NewKeyRow): Record<string, unknown> {
  return { key: row.key, fingerprint: row.fingerprint.toString('hex'), status: row.answer.status, body: row.answer.body ?? null, location: row.answer.location };
}

/** A batched insert's key lock: its expression given the SQL of the owning key's id and of a keyRowDoc (NULL: unkeyed, true). */
export function keyLockOfDoc(apiKeyId: string, doc: string): string {
  return `CASE WHEN ${doc} IS NULL THEN true ELSE ${tryLock(apiKeyId, `(${doc}->>'key')`)} END`;
}

/**
 * The key rows of a batched insert as a CTE: for each row of `source` (with
 * the columns api_key_id and key_row, a keyRowDoc or NULL) that is joined
 * to what it wrote, in the same commit, as keyRowCte.
 */
export function keyRowsCte(source: string): string {
  return `idem AS (
  INSERT INTO idempotency_keys (${COLUMNS})
  SELECT api_key_id, key_row->>'key', decode(key_row->>'fingerprint', 'hex'), (key_row->>'status')::smallint, key_row->'body', key_row->>'location'
    FROM ${source} WHERE key_row IS NOT NULL
)`;
}

/** keyRowCte's parameter values. */
export function keyRowValues(row: NewKeyRow): unknown[] {
  return [row.key, row.fingerprint, row.answer.status, JSON.stringify(row.answer.body ?? null), row.answer.location];
}

/** What a keyed insert statement said about its key lock: throws when another request holds it. */
export function keyHeld(held: boolean | undefined): void {
  if (held === false) throw new IdempotencyKeyBusy();
}

/** Inside a transaction, before anything is written: the key's lock, or IdempotencyKeyBusy. */
export async function lockKey(client: pg.ClientBase, scope: IdempotencyScope): Promise<void> {
  const r = await client.query<{ held: boolean }>({ name: 'mj-idem-lock', text: `SELECT ${tryLock('$1', '$2')} AS held`, values: [scope.apiKeyId, scope.key] });
  keyHeld(r.rows[0]!.held);
}

/** Write a key row inside the transaction that holds its lock. */
export async function insertKeyRow(client: pg.ClientBase, row: NewKeyRow): Promise<void> {
  await client.query({
    name: 'mj-idem-insert', text: `INSERT INTO idempotency_keys (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)`,
    values: [row.apiKeyId, ...keyRowValues(row)],
  });
}

function isKeyConflict(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === UNIQUE_VIOLATION && e.constraint === PRIMARY_KEY;
}

/**
 * Run a write that carries a key row. A key held by an expired row (not yet
 * swept) is freed and the write runs once more; a key held otherwise throws
 * IdempotencyKeyTaken, and nothing was written.
 */
export async function withKeyRow<T>(pool: pg.Pool, scope: IdempotencyScope | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (!scope || !isKeyConflict(err)) throw err;
    if (!(await deleteExpired(pool, scope))) throw new IdempotencyKeyTaken();
    try {
      return await write();
    } catch (again) {
      throw isKeyConflict(again) ? new IdempotencyKeyTaken() : again;
    }
  }
}

async function deleteExpired(pool: pg.Pool, scope: IdempotencyScope): Promise<boolean> {
  const r = await pool.query({
    name: 'mj-idem-expire',
    text: 'DELETE FROM idempotency_keys WHERE api_key_id = $1 AND key = $2 AND created_at < now() - make_interval(secs => $3)',
    values: [scope.apiKeyId, scope.key, REPLAY_WINDOW_SECONDS],
  });
  return r.rowCount === 1;
}

interface Row {
  fingerprint: Buffer;
  response_status: number;
  response_body: unknown;
  response_location: string | null;
}

/** The answer a key holds, unless it expired. */
export async function readKey(pool: pg.Pool, scope: IdempotencyScope): Promise<HeldKey | undefined> {
  const { rows: [row] } = await pool.query<Row>({
    name: 'mj-idem-read',
    text: `SELECT fingerprint, response_status, response_body, response_location FROM idempotency_keys
            WHERE api_key_id = $1 AND key = $2 AND created_at >= now() - make_interval(secs => $3)`,
    values: [scope.apiKeyId, scope.key, REPLAY_WINDOW_SECONDS],
  });
  return row && { fingerprint: row.fingerprint, answer: { status: row.response_status, body: row.response_body, location: row.response_location } };
}

/**
 * Store a final answer of a request that created nothing. False when the
 * key is held (readKey says by what) or its lock is; an expired holder is
 * replaced.
 */
export async function storeAnswer(pool: pg.Pool, row: NewKeyRow): Promise<boolean> {
  const r = await pool.query({
    name: 'mj-idem-store',
    text: `INSERT INTO idempotency_keys AS k (${COLUMNS})
           SELECT $1::uuid, $2::text, $3::bytea, $4::smallint, $5::jsonb, $6::text WHERE ${tryLock('$1', '$2')}
           ON CONFLICT (api_key_id, key) DO UPDATE
              SET fingerprint = EXCLUDED.fingerprint, response_status = EXCLUDED.response_status,
                  response_body = EXCLUDED.response_body, response_location = EXCLUDED.response_location, created_at = now()
            WHERE k.created_at < now() - make_interval(secs => $7)`,
    values: [row.apiKeyId, ...keyRowValues(row), REPLAY_WINDOW_SECONDS],
  });
  return r.rowCount === 1;
}

/**
 * Delete expired rows, oldest first, skipping any another statement holds:
 * run after one keyed request in SWEEP_EVERY, so the table needs no cleanup
 * job. Returns how many went.
 */
export async function sweepExpiredKeys(pool: pg.Pool): Promise<number> {
  const r = await pool.query({
    name: 'mj-idem-sweep',
    text: `DELETE FROM idempotency_keys
            WHERE ctid = ANY (ARRAY(
              SELECT ctid FROM idempotency_keys
               WHERE created_at < now() - make_interval(secs => $1)
               ORDER BY created_at
               LIMIT ${SWEEP_LIMIT}
               FOR UPDATE SKIP LOCKED))`,
    values: [REPLAY_WINDOW_SECONDS],
  });
  return r.rowCount ?? 0;
}
