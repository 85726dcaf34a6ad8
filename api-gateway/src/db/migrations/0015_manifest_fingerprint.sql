-- A MediaJob applied from a manifest (kubectl, a GitOps pipeline) is
-- recorded with the sha256 of its spec (canonical JSON, as the API server
-- stored it). When the resource is gone (its ttlSecondsAfterFinished, a
-- delete) and the pipeline applies the same manifest again, the operator
-- finds the finished record by namespace, name and fingerprint and restores
-- it instead of downloading again (issue 18, docs/gitops.md). Gateway jobs
-- have none and are not in the index.
ALTER TABLE jobs ADD COLUMN manifest_sha256 bytea NULL;
CREATE INDEX jobs_manifest_idx ON jobs (cr_namespace, cr_name, finished_at DESC) WHERE manifest_sha256 IS NOT NULL;
