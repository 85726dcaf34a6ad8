-- A NOTIFY per accepted row is not free (docs/adr/0017, "a NOTIFY per
-- commit is not free"): every transaction that notifies takes Postgres'
-- global notify-queue lock at commit, so the insert triggers of 0013
-- serialised the gateway's commits (pgbench: 8.7k → 2.4k inserts/s). The
-- gateway now pokes the materializer after its commit, coalesced
-- (lib/src/db/materialize.ts, materializePoke). The notice of a started
-- batch stays a trigger: it is rare, and it names the batch.
DROP TRIGGER jobs_materialize_notify ON jobs;
DROP TRIGGER batches_materialize_notify ON batches;

CREATE OR REPLACE FUNCTION mediajobs_materialize_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('mediajobs_materialize', 'start ' || NEW.cr_namespace || '/' || NEW.cr_name);
  RETURN NULL;
END $$;
