-- Storage usage per key (GET /usage, the storage quota; issue 14), kept on
-- the job counter shards rather than summed over history: GET /usage reads
-- at most 16 rows however many jobs a key has.
--   uploaded_bytes: what the key's jobs stored (media, subtitles,
--     thumbnail), added once when a job completes; never reduced.
--   reserved_bytes: held by the key's jobs that have not ended, taken with
--     their rows, adjusted when a runner reports the size it expects, and
--     released by the statement that ends them.
ALTER TABLE job_counters
  ADD COLUMN uploaded_bytes bigint NOT NULL DEFAULT 0,
  ADD COLUMN reserved_bytes bigint NOT NULL DEFAULT 0;

-- A job's reservation, so that its end releases exactly what it holds. The
-- size of a job's output is not known when it is accepted; 512 MiB is the
-- documented estimate (api-gateway/README.md, "Usage and storage quota")
-- until its runner reports what it expects to deliver (status.expectedBytes,
-- which the status mirror makes the reservation: lib/src/db/jobs.ts).
-- Jobs accepted before this migration reserved nothing.
ALTER TABLE jobs ADD COLUMN reserved_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ALTER COLUMN reserved_bytes SET DEFAULT 536870912;

-- What the rows already say: the delivered files of completed jobs count
-- as uploaded (sidecar sizes were not recorded before).
INSERT INTO job_counters (api_key_id, shard, uploaded_bytes)
SELECT api_key_id, 0, sum(file_size) FROM jobs WHERE status = 'Completed' AND file_size IS NOT NULL GROUP BY api_key_id
ON CONFLICT (api_key_id, shard) DO UPDATE SET uploaded_bytes = job_counters.uploaded_bytes + EXCLUDED.uploaded_bytes;
