-- Idempotency keys of POST /jobs and POST /jobs/bulk (issue 15, the IETF
-- Idempotency-Key header draft). One row per (API key, client key): inserted
-- in_flight before the request runs, so the row itself is the lock that lets
-- exactly one of several concurrent duplicates run on any replica; completed
-- with the answer to replay. `claim` names the request that holds the row, so
-- a request that outlived the in-flight timeout and was taken over cannot
-- overwrite or release its successor's row. Statements: src/db/idempotency.ts.
CREATE TABLE idempotency_keys (
  api_key_id        uuid NOT NULL,
  key               text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
  -- sha256 of the method, the path and the canonical JSON body.
  fingerprint       bytea NOT NULL,
  status            text NOT NULL CHECK (status IN ('in_flight', 'completed')),
  claim             uuid NOT NULL,
  response_status   smallint NULL,
  response_body     jsonb NULL,
  response_location text NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz NULL,
  PRIMARY KEY (api_key_id, key),
  CHECK ((status = 'completed') = (response_status IS NOT NULL AND completed_at IS NOT NULL))
)
-- Every row is updated once, soon after its insert, and no indexed column
-- changes: room left on the page keeps that update HOT (no index entries).
WITH (fillfactor = 80);

-- The bounded sweep of expired rows (oldest first) done with each stored answer.
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
