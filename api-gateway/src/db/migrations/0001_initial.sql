-- The schema of docs/design/spine.md. The gateway owns it; the operator
-- reads and writes rows but never changes the schema.

CREATE TABLE organizations (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id      uuid NULL REFERENCES organizations (id),
  name                 text NOT NULL,
  -- sha256 hex of the key; the key itself is never stored. UNIQUE gives the
  -- index every authenticated request looks up.
  key_hash             text NOT NULL UNIQUE,
  key_prefix           text NOT NULL,
  revoked_at           timestamptz NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  storage_limit_bytes  bigint NULL,
  max_resolution       text NULL,
  max_duration_seconds int NULL,
  max_filesize_bytes   bigint NULL
);

-- Total jobs per key, kept rather than counted: GET /jobs reads at most 16
-- rows instead of a COUNT(*) over the key's history, and spreading each
-- key's increments over 16 shards keeps concurrent POST /jobs from queueing
-- on one row lock.
CREATE TABLE job_counters (
  api_key_id uuid NOT NULL,
  shard      smallint NOT NULL CHECK (shard >= 0 AND shard < 16),
  count      bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (api_key_id, shard)
);

-- No foreign key from jobs to api_keys on purpose: every insert would take a
-- FOR KEY SHARE lock on the key's row, and concurrent inserts of one key
-- then pile up in MultiXacts on that single row. Keys are revoked, never
-- deleted, so the reference cannot dangle in practice; jobs applied with
-- kubectl may even name a key this database has not seen yet.
CREATE TABLE jobs (
  id              uuid PRIMARY KEY,
  api_key_id      uuid NOT NULL,
  url             text NOT NULL,
  status          text NOT NULL DEFAULT 'Pending'
                  CHECK (status IN ('Pending', 'Processing', 'Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin')),
  step            text NOT NULL DEFAULT 'Queued'
                  CHECK (step IN ('Queued', 'Downloading', 'Muxing', 'Uploading', 'Finished')),
  progress        int NOT NULL DEFAULT 0,
  options         jsonb NOT NULL,
  webhook_url_enc text NULL,
  s3_key          text NULL,
  error           text NULL,
  error_type      text NULL CHECK (error_type IN ('error', 'warning')),
  reason          text NULL,
  file_size       bigint NULL,
  actual_quality  text NULL,
  title           text NULL,
  description     text NULL,
  release_date    text NULL,
  subtitle_key    text NULL,
  thumbnail_key   text NULL,
  cr_namespace    text NULL,
  cr_name         text NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  started_at      timestamptz NULL,
  finished_at     timestamptz NULL,
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- GET /jobs, newest first: the page is read in index order, never sorted.
CREATE INDEX jobs_key_created_idx ON jobs (api_key_id, created_at DESC, id DESC);
-- GET /jobs?status=...: the same with the filter as an index prefix.
CREATE INDEX jobs_key_status_created_idx ON jobs (api_key_id, status, created_at DESC, id DESC);
-- The operator's sweeper looks for rows still Pending whose MediaJob was
-- never created (the gateway's create failed); only Pending rows are in it,
-- so it stays as small as the backlog.
CREATE INDEX jobs_pending_created_idx ON jobs (created_at) WHERE status = 'Pending';

CREATE TABLE outbox (
  id              bigserial PRIMARY KEY,
  -- Deterministic (from sha256 of jobId:type), so a replayed transition inserts nothing.
  event_id        uuid NOT NULL UNIQUE,
  job_id          uuid NULL,
  type            text NOT NULL,
  target_enc      text NOT NULL,
  payload         jsonb NOT NULL,
  attempts        int NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz NULL,
  failed_at       timestamptz NULL,
  last_error      text NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- The deliverer's poll: only undelivered, unfailed events are in it.
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX outbox_job_idx ON outbox (job_id);
