// The idempotency_keys table (migration 0005): every statement on it. A row
// is claimed (inserted in_flight) before a keyed request runs and is the lock
// shared by every gateway replica; it is then completed with the answer to
// replay (sweeping a few expired rows on the way), or released (deleted)
// when the request ended without a final answer. What the header means and
// which answers are final is ../idempotency.ts's.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';

/** How long a completed answer is replayed. */
export const REPLAY_WINDOW_SECONDS = 24 * 60 * 60;
/** An in_flight row older than this is abandoned (its gateway died): the next request takes it over. */
export const IN_FLIGHT_TIMEOUT_SECONDS = 60;
/** Expired rows deleted with each stored answer: more than one, to keep up with the claims; few enough never to be noticed. */
const SWEEP_LIMIT = 10;

export interface IdempotencyScope {
  apiKeyId: string;
  key: string;
}

export interface StoredAnswer {
  status: number;
  body: unknown;
  location: string | null;
}

/** What a claim found: the row is ours now, or someone else's (with what it holds). */
export type Claim =
  | { outcome: 'claimed'; claim: string }
  | { outcome: 'in_flight'; fingerprint: Buffer }
  | { outcome: 'completed'; fingerprint: Buffer; answer: StoredAnswer };

// The claim: the insert succeeds for a new key; on a conflict the WHERE lets
// it take over an expired answer or an abandoned in_flight row, and otherwise
// leaves the row as it is and returns nothing. Concurrent claims of one key
// wait for each other on the row, so exactly one of them gets it. It locks
// that row only: the sweep is COMPLETE's, so a claim never waits while
// holding another row (two claims sweeping each other's rows would deadlock).
const CLAIM = `
INSERT INTO idempotency_keys AS k (api_key_id, key, fingerprint, status, claim)
VALUES ($1, $2, $3, 'in_flight', $6)
ON CONFLICT (api_key_id, key) DO UPDATE
   SET fingerprint = EXCLUDED.fingerprint, status = 'in_flight', claim = EXCLUDED.claim,
       response_status = NULL, response_body = NULL, response_location = NULL,
       created_at = now(), completed_at = NULL
 WHERE k.created_at < now() - make_interval(secs => $4)
    OR (k.status = 'in_flight' AND k.created_at < now() - make_interval(secs => $5))
RETURNING k.claim`;

// The row a claim did not get. A separate statement: the claim's own snapshot
// may predate the concurrent insert it waited for.
const READ = `
SELECT fingerprint, status, response_status, response_body, response_location
  FROM idempotency_keys
 WHERE api_key_id = $1 AND key = $2 AND created_at >= now() - make_interval(secs => $3)`;

// Storing an answer also deletes a few expired rows (oldest first, skipping
// any another statement holds), so the table needs no cleanup job. The sweep
// never waits; the update waits at most for a claim of the same key.
const COMPLETE = `
WITH swept AS (
  DELETE FROM idempotency_keys
   WHERE ctid = ANY (ARRAY(
     SELECT ctid FROM idempotency_keys
      WHERE created_at < now() - make_interval(secs => $7)
        AND NOT (api_key_id = $1 AND key = $2)
      ORDER BY created_at
      LIMIT ${SWEEP_LIMIT}
      FOR UPDATE SKIP LOCKED))
)
UPDATE idempotency_keys
   SET status = 'completed', response_status = $4, response_body = $5, response_location = $6, completed_at = now()
 WHERE api_key_id = $1 AND key = $2 AND claim = $3 AND status = 'in_flight'`;

const RELEASE = `DELETE FROM idempotency_keys WHERE api_key_id = $1 AND key = $2 AND claim = $3 AND status = 'in_flight'`;

interface Row {
  fingerprint: Buffer;
  status: 'in_flight' | 'completed';
  response_status: number | null;
  response_body: unknown;
  response_location: string | null;
}

/**
 * Claim a key for a request with this fingerprint, or say what holds it. A
 * row that vanished between the two statements (its request was released)
 * is claimed again, a few times at most.
 */
export async function claimKey(pool: pg.Pool, scope: IdempotencyScope, fingerprint: Buffer): Promise<Claim> {
  for (let attempt = 0; ; attempt++) {
    const claim = randomUUID();
    const inserted = await pool.query<{ claim: string }>({
      name: 'mj-idem-claim', text: CLAIM,
      values: [scope.apiKeyId, scope.key, fingerprint, REPLAY_WINDOW_SECONDS, IN_FLIGHT_TIMEOUT_SECONDS, claim],
    });
    if (inserted.rowCount === 1) return { outcome: 'claimed', claim };
    const { rows: [row] } = await pool.query<Row>({ name: 'mj-idem-read', text: READ, values: [scope.apiKeyId, scope.key, REPLAY_WINDOW_SECONDS] });
    if (row?.status === 'completed') {
      return { outcome: 'completed', fingerprint: row.fingerprint, answer: { status: row.response_status!, body: row.response_body, location: row.response_location } };
    }
    // In flight, or released (or expired) just now and worth one more try; never an endless loop.
    if (row || attempt >= 2) return { outcome: 'in_flight', fingerprint: row?.fingerprint ?? fingerprint };
  }
}

/** Record the final answer of the request holding `claim`; false when the row is no longer its own (taken over). */
export async function completeKey(pool: pg.Pool, scope: IdempotencyScope, claim: string, answer: StoredAnswer): Promise<boolean> {
  const r = await pool.query({
    name: 'mj-idem-complete', text: COMPLETE,
    values: [scope.apiKeyId, scope.key, claim, answer.status, JSON.stringify(answer.body ?? null), answer.location, REPLAY_WINDOW_SECONDS],
  });
  return r.rowCount === 1;
}

/** Forget the claim of a request that ended without a final answer, so a retry runs again. */
export async function releaseKey(pool: pg.Pool, scope: IdempotencyScope, claim: string): Promise<void> {
  await pool.query({ name: 'mj-idem-release', text: RELEASE, values: [scope.apiKeyId, scope.key, claim] });
}
