-- Idempotency keys are written with what their request creates (issue 15:
-- a keyed POST /jobs costs one commit, as an unkeyed one does). A row is
-- inserted in the job's own statement or transaction, already holding the
-- answer, so every row holds an answer and no row is ever "in flight": a
-- request still running holds the key's advisory lock instead
-- (lib/src/db/idempotency.ts). Rows of the old scheme still in flight (no
-- answer yet) belong to requests running during the upgrade: they are
-- dropped, and such a request's old gateway only logs that its answer was
-- not stored.
DELETE FROM idempotency_keys WHERE response_status IS NULL;

ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_check;
ALTER TABLE idempotency_keys DROP COLUMN status, DROP COLUMN claim, DROP COLUMN completed_at;
ALTER TABLE idempotency_keys ALTER COLUMN response_status SET NOT NULL;
-- Rows are no longer updated after their insert: no room to keep on the page.
ALTER TABLE idempotency_keys SET (fillfactor = 100);
