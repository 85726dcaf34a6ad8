-- What each upload grant did on managed storage on S3 (docs/adr/0012,
-- issue 35 items 1 and 2). A grant is one runner attempt's token (the
-- operator mints one per attempt's Secret); it is named here by the
-- SHA-256 of the token, never the token. The broker
-- (lib/src/storage/grant-ledger.ts) writes every object a grant begins, the
-- part URLs it signs (with the length each signs) and what it completed,
-- with the size as the bucket stores it, and bounds a grant with them; the
-- operator reads which job last completed a key, and its size, before it
-- signs, records, bills or deletes what a runner reports.
CREATE TABLE grant_uploads (
  id           bigserial PRIMARY KEY,
  grant_id     text NOT NULL,
  job_id       text NOT NULL,
  key          text NOT NULL,
  -- Set once CreateMultipartUpload answered; null while it is asked.
  upload_id    text NULL,
  state        text NOT NULL DEFAULT 'begun' CHECK (state IN ('begun', 'completed', 'aborted', 'deleted')),
  -- Bytes as stored (HEAD after CompleteMultipartUpload), never as the runner said.
  size         bigint NULL,
  begun_at     timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz NULL
);
CREATE INDEX grant_uploads_grant ON grant_uploads (grant_id);
CREATE INDEX grant_uploads_job ON grant_uploads (job_id);
CREATE INDEX grant_uploads_completed_key ON grant_uploads (key, completed_at DESC) WHERE completed_at IS NOT NULL;

CREATE TABLE grant_parts (
  upload bigint NOT NULL REFERENCES grant_uploads (id) ON DELETE CASCADE,
  number int NOT NULL,
  -- The Content-Length the part's URL signs: the last one signed for this part.
  bytes  bigint NOT NULL,
  -- How many URLs were signed for it (a part sent again after a failure).
  signed int NOT NULL DEFAULT 1,
  PRIMARY KEY (upload, number)
);
