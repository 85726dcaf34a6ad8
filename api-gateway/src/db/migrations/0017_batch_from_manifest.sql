-- Whose spec.paused a batch obeys (issue 34 item 7; docs/gitops.md,
-- "Starting a paused MediaBatch"). A batch the API made is paused and
-- started by its row (POST /batch/{id}/start; the operator then unpauses
-- its MediaBatch). A MediaBatch applied with kubectl or a GitOps pipeline is
-- paused and started by its manifest's spec.paused, a field its applier
-- owns: the API does not start it (409) and the batch controller starts the
-- row when the spec says so. Statements: lib/src/db/batches.ts.
ALTER TABLE batches ADD COLUMN from_manifest boolean NOT NULL DEFAULT false;

-- Rows from before this migration: the API names a batch's MediaBatch after
-- the batch id, a manifest's row keeps the object's own name.
UPDATE batches SET from_manifest = true WHERE cr_name IS NOT NULL AND cr_name <> id::text;
