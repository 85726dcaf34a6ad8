-- A batch's episode job ids, in episode order, kept on its row: written once
-- with the batch (insertBatch) and never changed, since episodes are neither
-- added nor removed. GET /batch/{id} then reads one row by its primary key.
-- Reading them from jobs_batch_idx instead (0003) cost a heap visit per
-- episode whenever those rows had just been updated, which is exactly while
-- the batch controller creates their MediaJobs and clients poll the batch
-- (issue 13's benchmark: that query's p99 rose from 6.5 to 20 ms).
ALTER TABLE batches ADD COLUMN episode_jobs uuid[] NULL;

UPDATE batches b
   SET episode_jobs = ARRAY(SELECT e.id FROM jobs e WHERE e.batch_id = b.id ORDER BY e.batch_index);

ALTER TABLE batches ALTER COLUMN episode_jobs SET NOT NULL;
ALTER TABLE batches ADD CONSTRAINT batches_episode_jobs_check CHECK (cardinality(episode_jobs) = total_episodes);
