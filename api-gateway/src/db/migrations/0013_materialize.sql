-- Acceptance is one Postgres transaction (issue 16 item 1; docs/adr/0017).
-- The gateway no longer creates custom resources: a single job's MediaJob
-- and a batch's MediaBatch are created by the operator's materializer
-- (operator/src/materializer.ts) from the row. cr_created_at says whether
-- that has happened: NULL while the resource is still to be created, set
-- once it was created or found. Rows recorded from a kubectl manifest are
-- set at insert (their resource is where they came from). A batch's
-- episodes keep their own path (cr_name, set by the batch controller).
-- Statements: lib/src/db/materialize.ts.
ALTER TABLE jobs ADD COLUMN cr_created_at timestamptz NULL;
ALTER TABLE batches ADD COLUMN cr_created_at timestamptz NULL;

-- Rows from before this migration: created, except those the old sweeper
-- would still have created (Pending single jobs and open batches younger
-- than an hour), which the materializer creates or finds (AlreadyExists).
UPDATE jobs SET cr_created_at = updated_at
 WHERE batch_id IS NULL AND NOT (status = 'Pending' AND cr_name IS NOT NULL AND created_at > now() - interval '1 hour');
UPDATE batches SET cr_created_at = updated_at
 WHERE NOT (status IN ('paused', 'processing') AND cr_name IS NOT NULL AND created_at > now() - interval '1 hour');

-- The materializer's page: oldest first, only rows still to create.
CREATE INDEX jobs_to_materialize_idx ON jobs (created_at)
  WHERE cr_created_at IS NULL AND batch_id IS NULL AND status = 'Pending';
CREATE INDEX batches_to_materialize_idx ON batches (created_at)
  WHERE cr_created_at IS NULL AND status IN ('paused', 'processing');

-- Promptly: every commit that adds such a row wakes the materializer.
-- Postgres delivers a notification only when its transaction commits, and
-- folds identical ones of a transaction into one, so a bulk request of 100
-- rows is one wake-up. A batch started (paused → processing) names itself,
-- so the batch controller creates its episodes at once rather than at its
-- next periodic pass.
CREATE FUNCTION mediajobs_materialize_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    PERFORM pg_notify('mediajobs_materialize', 'start ' || NEW.cr_namespace || '/' || NEW.cr_name);
  ELSE
    PERFORM pg_notify('mediajobs_materialize', 'new');
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_materialize_notify AFTER INSERT ON jobs
  FOR EACH ROW WHEN (NEW.cr_created_at IS NULL AND NEW.batch_id IS NULL)
  EXECUTE FUNCTION mediajobs_materialize_notify();
CREATE TRIGGER batches_materialize_notify AFTER INSERT ON batches
  FOR EACH ROW WHEN (NEW.cr_created_at IS NULL)
  EXECUTE FUNCTION mediajobs_materialize_notify();
CREATE TRIGGER batches_started_notify AFTER UPDATE OF status ON batches
  FOR EACH ROW WHEN (OLD.status = 'paused' AND NEW.status = 'processing' AND NEW.cr_name IS NOT NULL)
  EXECUTE FUNCTION mediajobs_materialize_notify();
