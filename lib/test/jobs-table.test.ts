// The jobs table on real Postgres: a job counts toward its key's total
// exactly once however it is recorded, a finished job's row never changes,
// a status change and its webhook events commit together (a replay adds
// nothing), a running job's reservation follows what its runner expects to
// deliver and its end releases exactly that, and the sealed columns are kept
// and cleared as the operator asks.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type pg from 'pg';
import {
  cancelJob, forgetInlineCredentials, findFinishedManifest, getJob, inlineCredentials, insertFromManifest, jobInserter, keyUsage, legacyDestination, listJobs,
  MIN_RESERVED_BYTES, resolvedDestination, saveResultUrls, syncStatus, type JobRow, type NewJob, type SavedDestinationSql,
} from '../src/db/jobs.js';
import { IdempotencyKeyBusy, readKey, type NewKeyRow } from '../src/db/idempotency.js';
import { markCreated, mediaJobsToCreate } from '../src/db/materialize.js';
import { eventId, OUTBOX_CHANNEL, type OutboxEvent } from '../src/db/outbox.js';
import type { MediaJob, MediaJobOptions, MediaJobStatus, Owned } from '../src/mediajob/types.js';
import { withClient } from '../src/pg-client.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';

// Rule 9 belongs to the gateway (api-gateway/src/destinations/store.ts);
// this stand-in has its shape: the key's default, or its destination of the
// named provider, else nothing.
const rule9: SavedDestinationSql = {
  byDefault: (key, org) => `SELECT id, provider, secret_name FROM storage_destinations
    WHERE ((owner_kind = 'api_key' AND owner_id = ${key}) OR (owner_kind = 'organization' AND owner_id = ${org})) AND is_default LIMIT 1`,
  byProvider: (key, org, provider) => `SELECT id, provider, secret_name FROM storage_destinations
    WHERE ((owner_kind = 'api_key' AND owner_id = ${key}) OR (owner_kind = 'organization' AND owner_id = ${org})) AND provider = ${provider}
    LIMIT 1`,
};
const insertJob = jobInserter(rule9);

const options = { url: 'https://media.test/v', format: 'mp4' } as MediaJobOptions;

function newJob(apiKeyId: string, target: NewJob['target']): NewJob {
  const id = randomUUID();
  return { id, apiKeyId, url: options.url, options, webhookUrl: null, crNamespace: 'mediajobs', crName: id, target };
}

function manifest(apiKeyId: string, name = 'from-kubectl'): Owned<MediaJob> {
  return {
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
    metadata: { name, namespace: 'team-a', uid: randomUUID(), creationTimestamp: '2024-05-01T10:00:00Z' },
    spec: { url: options.url, format: 'mp4', owner: { apiKeyId }, webhookUrl: 'https://hooks.test/x', destination: { type: 'managed' } },
  } as Owned<MediaJob>;
}


/** A manifest's spec fingerprint (what it is does not matter to the table). */
const FP = Buffer.alloc(32, 1);
describe('lib: the jobs table (real PostgreSQL)', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let pool: pg.Pool;

  before(async () => {
    db = await createTestDatabase('mediajobs_jobs_table');
    pool = db.pool;
  });
  after(async () => db?.drop());

  const total = async (apiKeyId: string) => (await listJobs(pool, apiKeyId, { limit: 1, offset: 0 })).total;
  const rowCount = async (apiKeyId: string) =>
    Number((await pool.query('SELECT count(*) FROM jobs WHERE api_key_id = $1', [apiKeyId])).rows[0].count);

  describe('gateway insert', () => {
    it('writes a Pending row and counts it once; a repeated id writes and counts nothing', async () => {
      const key = await insertApiKey(pool);
      const job = newJob(key, { kind: 'inline', destination: { type: 'inline', provider: 's3', secretName: 'mj-x' }, storage: () => 'sealed-creds' });
      expect(await insertJob(pool, job)).to.deep.equal({ type: 'inline', provider: 's3', secretName: 'mj-x' });
      const err = await insertJob(pool, job).catch((e: { code?: string }) => e);
      expect(err).to.have.property('code', '23505');
      expect(await total(key)).to.equal(1);
      expect(await getJob(pool, key, job.id)).to.include({ id: job.id, status: 'Pending', step: 'Queued', progress: 0, finished_at: null });
      expect(await inlineCredentials(pool, job.id)).to.equal('sealed-creds');
    });

    it('resolves a saved destination in the same statement, and writes and counts nothing for an unconfigured provider', async () => {
      const key = await insertApiKey(pool);
      const managed = newJob(key, { kind: 'saved', organizationId: null });
      expect(await insertJob(pool, managed)).to.deep.equal({ type: 'managed' });
      const dest = (await pool.query<{ id: string }>(
        `INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, secret_name)
         VALUES ('api_key', $1, 'gcs', 'keyvault', '{}', 'mj-dest-key-x-gcs') RETURNING id`, [key])).rows[0]!.id;
      const saved = newJob(key, { kind: 'saved', organizationId: null, provider: 'gcs' });
      expect(await insertJob(pool, saved)).to.deep.equal({ type: 'saved', provider: 'gcs', secretName: 'mj-dest-key-x-gcs' });
      expect((await pool.query('SELECT destination_id FROM jobs WHERE id = $1', [saved.id])).rows[0].destination_id).to.equal(dest);
      expect(await insertJob(pool, newJob(key, { kind: 'saved', organizationId: null, provider: 's3' }))).to.equal(undefined);
      expect(await rowCount(key)).to.equal(2);
      expect(await total(key)).to.equal(2);
    });

    it('counts concurrent inserts of one key on the shards, all of them', async () => {
      const key = await insertApiKey(pool);
      await Promise.all(Array.from({ length: 40 }, () => insertJob(pool, newJob(key, { kind: 'saved', organizationId: null }))));
      expect(await total(key)).to.equal(40);
      const page = await listJobs(pool, key, { limit: 5, offset: 0, status: 'Pending' });
      expect(page.jobs).to.have.length(5);
      expect(page.jobs[0]!.created_at).to.be.a('number');
      expect(await getJob(pool, await insertApiKey(pool), page.jobs[0]!.id), 'another key\'s job').to.equal(undefined);
    });
  });

  describe('gateway insert: the jobs of one turn share a statement', () => {
    /** An inserter that records the jobs each of its statements wrote (or tried to). */
    function observedInserter(): { insert: ReturnType<typeof jobInserter>; statements: number[] } {
      const statements: number[] = [];
      return { insert: jobInserter(rule9, (n) => statements.push(n)), statements };
    }
    const keyed = (job: NewJob, key: string): NewJob => ({
      ...job,
      keyRow: { apiKeyId: job.apiKeyId, key, fingerprint: Buffer.alloc(32, 7), answer: { status: 201, body: { job_id: job.id }, location: `/jobs/${job.id}` } } satisfies NewKeyRow,
    });
    const saveGcs = (owner: string) => pool.query(
      `INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, secret_name, is_default)
       VALUES ('api_key', $1, 'gcs', 'keyvault', '{}', $2, true)`, [owner, `mj-dest-${owner}-gcs`]);

    it('gives each job its own destination, key row and outcome, and counts each key once per job', async () => {
      const { insert, statements } = observedInserter();
      const [a, b] = [await insertApiKey(pool), await insertApiKey(pool)];
      await saveGcs(b);
      const jobs = [
        newJob(a, { kind: 'inline', destination: { type: 'inline', provider: 's3', secretName: 'mj-in' }, storage: () => 'sealed-creds' }),
        newJob(a, { kind: 'saved', organizationId: null }),
        keyed(newJob(a, { kind: 'saved', organizationId: null }), 'retry-1'),
        newJob(b, { kind: 'saved', organizationId: null, provider: 'gcs' }),
        newJob(b, { kind: 'saved', organizationId: null, provider: 's3' }),
        newJob(b, { kind: 'saved', organizationId: null }),
      ];
      const results = await Promise.all(jobs.map((j) => insert(pool, j)));
      expect(statements, 'one statement for the turn').to.deep.equal([6]);
      const gcs = { type: 'saved', provider: 'gcs', secretName: `mj-dest-${b}-gcs` };
      expect(results).to.deep.equal([
        { type: 'inline', provider: 's3', secretName: 'mj-in' }, { type: 'managed' }, { type: 'managed' }, gcs, undefined, gcs,
      ]);
      expect(await inlineCredentials(pool, jobs[0]!.id)).to.equal('sealed-creds');
      expect(await readKey(pool, { apiKeyId: a, key: 'retry-1' })).to.deep.include({ answer: { status: 201, body: { job_id: jobs[2]!.id }, location: `/jobs/${jobs[2]!.id}` } });
      expect([await rowCount(a), await total(a), await rowCount(b), await total(b)], 'the unconfigured provider wrote nothing').to.deep.equal([3, 3, 2, 2]);
    });

    it('writes the others when one job is at fault, and fails only that one', async () => {
      const { insert, statements } = observedInserter();
      const key = await insertApiKey(pool);
      const existing = newJob(key, { kind: 'saved', organizationId: null });
      await insertJob(pool, existing);
      const fresh = Array.from({ length: 3 }, () => newJob(key, { kind: 'saved', organizationId: null }));
      const outcomes = await Promise.allSettled([...fresh, existing].map((j) => insert(pool, j)));
      expect(outcomes.map((o) => o.status)).to.deep.equal(['fulfilled', 'fulfilled', 'fulfilled', 'rejected']);
      expect((outcomes[3] as PromiseRejectedResult).reason).to.have.property('code', '23505');
      expect(statements, 'the shared statement failed and undid all of it; then one each').to.deep.equal([4, 1, 1, 1, 1]);
      expect([await rowCount(key), await total(key)]).to.deep.equal([4, 4]);
    });

    it('writes one job for a key sent twice in one turn, and none for a key another transaction holds', async () => {
      const { insert } = observedInserter();
      const key = await insertApiKey(pool);
      const twice = [keyed(newJob(key, { kind: 'saved', organizationId: null }), 'twice'), keyed(newJob(key, { kind: 'saved', organizationId: null }), 'twice')];
      const outcomes = await Promise.allSettled(twice.map((j) => insert(pool, j)));
      expect(outcomes.filter((o) => o.status === 'fulfilled'), 'exactly one written').to.have.length(1);
      expect(await rowCount(key)).to.equal(1);

      await withClient(pool, async (holder) => {
        await holder.query('BEGIN');
        await holder.query(`SELECT pg_try_advisory_xact_lock(hashtextextended($1::uuid::text || '/' || $2::text, 0))`, [key, 'held']);
        const held = keyed(newJob(key, { kind: 'saved', organizationId: null }), 'held');
        const other = newJob(key, { kind: 'saved', organizationId: null });
        const [h, o] = await Promise.allSettled([insert(pool, held), insert(pool, other)]);
        await holder.query('ROLLBACK');
        expect(h.status === 'rejected' && h.reason).to.be.instanceOf(IdempotencyKeyBusy);
        expect(o.status).to.equal('fulfilled');
      });
      expect([await rowCount(key), await total(key)]).to.deep.equal([2, 2]);
    });
  });

  describe('manifest insert (kubectl-applied jobs)', () => {
    it('records the job once, with its creation time and sealed webhook, however often it is recorded', async () => {
      const key = await insertApiKey(pool);
      const mj = manifest(key);
      const id = mj.metadata.uid!;
      expect(await insertFromManifest(pool, id, mj, () => 'sealed-hook', FP)).to.equal(true);
      expect(await insertFromManifest(pool, id, mj, () => 'sealed-hook', FP)).to.equal(true);
      expect(await total(key)).to.equal(1);
      const r = await pool.query('SELECT status, webhook_url_enc, cr_namespace, cr_name, created_at, destination, options FROM jobs WHERE id = $1', [id]);
      expect(r.rows[0]).to.deep.include({
        status: 'Pending', webhook_url_enc: 'sealed-hook', cr_namespace: 'team-a', cr_name: 'from-kubectl', destination: { type: 'managed' },
      });
      expect(r.rows[0].created_at.toISOString()).to.equal('2024-05-01T10:00:00.000Z');
      // The stored options never carry the webhook URL, the owner or the destination.
      expect(r.rows[0].options).to.deep.equal({ url: options.url, format: 'mp4' });
    });

    it('counts concurrent recordings of one manifest once, and each of them reports the job recorded', async () => {
      const key = await insertApiKey(pool);
      const mj = manifest(key);
      const results = await Promise.all(Array.from({ length: 8 }, () => insertFromManifest(pool, mj.metadata.uid!, mj, null, FP)));
      expect(results).to.deep.equal(Array(8).fill(true));
      expect(await total(key)).to.equal(1);
      expect(await rowCount(key)).to.equal(1);
    });

    it('finds the finished record of the same manifest (namespace, name, fingerprint) and nothing else', async () => {
      const key = await insertApiKey(pool);
      const mj = manifest(key);
      const other = Buffer.alloc(32, 7);
      const first = randomUUID();
      expect(await findFinishedManifest(pool, 'team-a', 'from-kubectl', FP)).to.equal(undefined);
      await insertFromManifest(pool, first, mj, null, FP);
      expect(await findFinishedManifest(pool, 'team-a', 'from-kubectl', FP), 'still running').to.equal(undefined);
      await pool.query(`UPDATE jobs SET status = 'Completed', step = 'Finished', s3_key = 'k/file.mp4', file_size = 42, finished_at = now() WHERE id = $1`, [first]);
      expect(await findFinishedManifest(pool, 'team-a', 'from-kubectl', FP)).to.deep.include({ id: first, status: 'Completed', s3_key: 'k/file.mp4', file_size: '42' });
      expect(await findFinishedManifest(pool, 'team-a', 'from-kubectl', other), 'another spec').to.equal(undefined);
      expect(await findFinishedManifest(pool, 'team-b', 'from-kubectl', FP), 'another namespace').to.equal(undefined);
      expect(await findFinishedManifest(pool, 'team-a', 'other-name', FP), 'another name').to.equal(undefined);
    });

    it('records nothing for a revoked or unknown key', async () => {
      const key = await insertApiKey(pool);
      await pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key]);
      expect(await insertFromManifest(pool, randomUUID(), manifest(key), null, FP)).to.equal(false);
      const unknown = randomUUID();
      expect(await insertFromManifest(pool, randomUUID(), manifest(unknown), null, FP)).to.equal(false);
      expect(await rowCount(key) + await rowCount(unknown)).to.equal(0);
      expect(await total(key)).to.equal(0);
    });
  });

  describe('status mirror', () => {
    const events: (old: string) => OutboxEvent[] = (old) => [{ type: `from_${old}`, payload: { old } }];
    const outbox = async (jobId: string) => (await pool.query<{ event_id: string; type: string; payload: Record<string, unknown> }>(
      'SELECT event_id, type, payload FROM outbox WHERE job_id = $1 ORDER BY id', [jobId])).rows;

    async function job(webhook: string | null = 'sealed-hook'): Promise<string> {
      const key = await insertApiKey(pool);
      const j: NewJob = { ...newJob(key, { kind: 'saved', organizationId: null }), webhookUrl: webhook === null ? null : () => webhook };
      await insertJob(pool, j);
      return j.id;
    }

    it('returns the old status, and queues a transition\'s events with it: a replay adds nothing', async () => {
      const id = await job();
      const processing: MediaJobStatus = { status: 'Processing', step: 'Downloading', progress: 10, startTime: '2024-05-01T10:00:01Z' };
      const eventsFor = (old: string) => [{ type: 'job_processing', payload: { old } }];
      expect(await syncStatus(pool, id, processing, eventsFor)).to.equal('Pending');
      expect(await syncStatus(pool, id, processing, eventsFor)).to.equal('Processing');
      const queued = await outbox(id);
      expect(queued).to.deep.equal([{
        event_id: eventId(id, 'job_processing'), type: 'job_processing', payload: { old: 'Pending', event_id: eventId(id, 'job_processing') },
      }]);
    });

    it('never changes a terminal row, nor queues anything for it', async () => {
      const id = await job();
      const done: MediaJobStatus = {
        status: 'Completed', step: 'Finished', progress: 100, finishTime: '2024-05-01T10:05:00Z',
        result: { storageKey: 'videos/a.mp4', fileSize: 2048, title: 'A' },
      };
      expect(await syncStatus(pool, id, done, events)).to.equal('Pending');
      let asked = 0;
      const failed: MediaJobStatus = { status: 'Failed', step: 'Finished', error: 'late', errorType: 'error' };
      expect(await syncStatus(pool, id, failed, (old) => (asked++, events(old)))).to.equal(undefined);
      expect(asked).to.equal(0);
      const key = (await pool.query('SELECT api_key_id FROM jobs WHERE id = $1', [id])).rows[0].api_key_id;
      expect(await getJob(pool, key, id)).to.include({
        status: 'Completed', error: null, s3_key: 'videos/a.mp4', file_size: 2048, title: 'A', finished_at: Date.parse('2024-05-01T10:05:00Z'),
      });
      expect((await outbox(id)).map((e) => e.type)).to.deep.equal(['from_Pending']);
    });

    it('writes neither the row nor its events when building the events fails', async () => {
      const id = await job();
      const err = await syncStatus(pool, id, { status: 'Processing' }, () => { throw new Error('no events'); }).catch((e: Error) => e);
      expect(err).to.have.property('message', 'no events');
      expect((await pool.query('SELECT status FROM jobs WHERE id = $1', [id])).rows[0].status).to.equal('Pending');
      expect(await outbox(id)).to.deep.equal([]);
    });

    it('queues nothing for a job without a webhook, and announces queued events to the dispatcher on commit', async () => {
      const quiet = await job(null);
      expect(await syncStatus(pool, quiet, { status: 'Processing' }, events)).to.equal('Pending');
      expect(await outbox(quiet)).to.deep.equal([]);

      const loud = await job();
      const notified = await withClient(pool, async (listener) => {
        const heard: string[] = [];
        listener.on('notification', (n) => heard.push(n.channel));
        await listener.query(`LISTEN ${OUTBOX_CHANNEL}`);
        await syncStatus(pool, loud, { status: 'Processing' }, events);
        for (let i = 0; i < 50 && !heard.length; i++) await new Promise((r) => setTimeout(r, 20));
        await listener.query('UNLISTEN *');
        return heard;
      });
      expect(notified).to.deep.equal([OUTBOX_CHANNEL]);
    });

    it('passes the row to the event builder', async () => {
      const id = await job();
      let seen: JobRow | undefined;
      await syncStatus(pool, id, { status: 'Processing' }, (_old, row) => ((seen = row), []));
      expect(seen).to.include({ id, status: 'Pending', url: options.url, webhook_url_enc: 'sealed-hook' });
      expect(seen!.options).to.deep.equal(options);
    });
  });

  describe('storage reservation', () => {
    const MIB = 2 ** 20;
    const DEFAULT = 512 * MIB;
    const none = () => [];
    const reserved = async (key: string) => (await keyUsage(pool, key)).reservedBytes;
    const rowReserved = async (id: string) => Number((await pool.query('SELECT reserved_bytes FROM jobs WHERE id = $1', [id])).rows[0].reserved_bytes);

    async function running(opts: MediaJobOptions = options): Promise<{ key: string; id: string }> {
      const key = await insertApiKey(pool);
      const j = { ...newJob(key, { kind: 'saved', organizationId: null }), options: opts };
      await insertJob(pool, j);
      return { key, id: j.id };
    }

    it('takes the default when the job is written, then what the runner expects, once however often it is mirrored; the end releases it', async () => {
      const { key, id } = await running();
      expect(await reserved(key)).to.equal(DEFAULT);
      const processing: MediaJobStatus = { status: 'Processing', step: 'Downloading', progress: 5 };
      await syncStatus(pool, id, processing, none);
      expect(await reserved(key), 'no size reported yet').to.equal(DEFAULT);

      const expecting = { ...processing, expectedBytes: 300 * MIB };
      await syncStatus(pool, id, expecting, none);
      // An operator restarting replays what it mirrored last: nothing more is counted.
      await syncStatus(pool, id, expecting, none);
      await syncStatus(pool, id, { ...expecting, progress: 40 }, none);
      expect(await reserved(key)).to.equal(300 * MIB);
      expect(await rowReserved(id)).to.equal(300 * MIB);

      // A second report (a retried pod's choice) moves it again, by the difference.
      await syncStatus(pool, id, { ...expecting, expectedBytes: 2 * DEFAULT }, none);
      expect(await reserved(key)).to.equal(2 * DEFAULT);

      const done: MediaJobStatus = {
        status: 'Completed', step: 'Finished', progress: 100, expectedBytes: 2 * DEFAULT,
        result: { storageKey: 'videos/r.mp4', fileSize: 1000, uploadedBytes: 1200 },
      };
      await syncStatus(pool, id, done, none);
      await syncStatus(pool, id, done, none);
      expect(await keyUsage(pool, key)).to.deep.include({ reservedBytes: 0, uploadedBytes: 1200 });
    });

    it('is at least MIN_RESERVED_BYTES and at most the job\'s file-size limit', async () => {
      const small = await running();
      await syncStatus(pool, small.id, { status: 'Processing', expectedBytes: 1234 }, none);
      expect(await reserved(small.key)).to.equal(MIN_RESERVED_BYTES);
      await syncStatus(pool, small.id, { status: 'Processing', expectedBytes: 0 }, none);
      expect(await reserved(small.key)).to.equal(MIN_RESERVED_BYTES);

      const limited = await running({ ...options, limits: { maxFilesizeBytes: 50 * MIB } });
      await syncStatus(pool, limited.id, { status: 'Processing', expectedBytes: 4 * DEFAULT }, none);
      expect(await reserved(limited.key)).to.equal(50 * MIB);
      await syncStatus(pool, limited.id, { status: 'Failed', errorType: 'error', error: 'too large', expectedBytes: 4 * DEFAULT }, none);
      expect(await keyUsage(pool, limited.key)).to.deep.include({ reservedBytes: 0, uploadedBytes: 0 });
    });

    it('a cancellation releases what the row holds then, and a late report changes nothing', async () => {
      const { key, id } = await running();
      await syncStatus(pool, id, { status: 'Processing', expectedBytes: 3 * MIB }, none);
      expect(await reserved(key)).to.equal(3 * MIB);
      expect(await cancelJob(pool, id, 'Cancelled', key)).to.deep.include({ outcome: 'cancelled' });
      expect(await reserved(key)).to.equal(0);
      await syncStatus(pool, id, { status: 'Processing', expectedBytes: 9 * MIB }, none);
      expect(await reserved(key)).to.equal(0);
    });

    it('a status whose first mirror is already terminal releases the default, whatever it expected', async () => {
      const { key, id } = await running();
      await syncStatus(pool, id, { status: 'Failed', errorType: 'error', error: 'x', expectedBytes: 7 * MIB }, none);
      expect(await keyUsage(pool, key)).to.deep.include({ reservedBytes: 0, uploadedBytes: 0 });
    });
  });

  describe('rows the materializer creates MediaJobs for', () => {
    it('builds every Pending single job still without its MediaJob, oldest first, until marked; never a manifest\'s', async () => {
      const key = await insertApiKey(pool);
      const at = async (agoSeconds: number, patch = '') => {
        const j = newJob(key, { kind: 'saved', organizationId: null });
        await insertJob(pool, j);
        await pool.query(`UPDATE jobs SET created_at = now() - make_interval(secs => $2) ${patch} WHERE id = $1`, [j.id, agoSeconds]);
        return j.id;
      };
      const oldest = await at(7200);
      const older = await at(600);
      const young = await at(0);
      await at(300, ", status = 'Processing'");
      await at(300, ', cr_name = NULL');
      await at(300, ', cr_created_at = now()'); // recorded from a manifest, or already created
      const mine = async () => (await mediaJobsToCreate(pool, 10_000)).filter((mj) => mj.spec.owner?.apiKeyId === key);
      const found = await mine();
      expect(found.map((mj) => mj.metadata.name)).to.deep.equal([oldest, older, young]);
      expect(found[0]!.metadata.namespace).to.equal('mediajobs');
      expect(found[0]!.spec).to.deep.include({ jobId: oldest, destination: { type: 'managed' } });
      expect((await mediaJobsToCreate(pool, 10_000, [older])).map((mj) => mj.metadata.name), 'held back').to.not.include(older);
      await markCreated(pool, 'jobs', [oldest, young]);
      expect((await mine()).map((mj) => mj.metadata.name)).to.deep.equal([older]);
    });
  });

  describe('sealed columns', () => {
    it('keeps inline credentials until the job ends, and the signed result URLs for GET /jobs/{id}', async () => {
      const key = await insertApiKey(pool);
      const j = newJob(key, { kind: 'inline', destination: { type: 'inline', provider: 's3' }, storage: () => 'sealed-creds' });
      await insertJob(pool, j);
      await saveResultUrls(pool, j.id, () => 'sealed-urls');
      await forgetInlineCredentials(pool, j.id);
      await forgetInlineCredentials(pool, j.id);
      expect(await inlineCredentials(pool, j.id)).to.equal(undefined);
      expect(await inlineCredentials(pool, randomUUID())).to.equal(undefined);
      expect(await getJob(pool, key, j.id)).to.include({ result_urls_enc: 'sealed-urls' });
    });

    it('finds the legacy destination a saved job was resolved to, and nothing once it is gone', async () => {
      const key = await insertApiKey(pool);
      const legacy = (await pool.query<{ id: string }>(
        `INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, credentials_enc)
         VALUES ('api_key', $1, 's3', 'legacy', '{}', 'sealed-legacy') RETURNING id`, [key])).rows[0]!.id;
      const j = newJob(key, { kind: 'saved', organizationId: null, provider: 's3' });
      expect(await insertJob(pool, j)).to.deep.equal({ type: 'saved', provider: 's3' });
      expect(await legacyDestination(pool, j.id)).to.deep.equal({ owner_kind: 'api_key', owner_id: key, provider: 's3', credentials_enc: 'sealed-legacy' });
      await pool.query('DELETE FROM storage_destinations WHERE id = $1', [legacy]);
      expect(await legacyDestination(pool, j.id)).to.equal(undefined);
    });

    it('finds the saved destination row of a provider a job was resolved to (Drive file URLs), and nothing once it is gone', async () => {
      const key = await insertApiKey(pool);
      const saved = (await pool.query<{ id: string }>(
        `INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, secret_name)
         VALUES ('api_key', $1, 'drive', 'keyvault', '{}', 'mj-dest-key-x-drive') RETURNING id`, [key])).rows[0]!.id;
      const j = newJob(key, { kind: 'saved', organizationId: null, provider: 'drive' });
      await insertJob(pool, j);
      const destination = { type: 'saved', provider: 'drive', secretName: 'mj-dest-key-x-drive' };
      expect(await resolvedDestination(pool, j.id, 'drive')).to.deep.equal({
        destination, source: 'keyvault', secret_name: 'mj-dest-key-x-drive', owner_kind: 'api_key', owner_id: key, credentials_enc: null,
      });
      expect(await resolvedDestination(pool, j.id, 'gcs')).to.deep.include({ destination, source: null });
      await pool.query('DELETE FROM storage_destinations WHERE id = $1', [saved]);
      expect(await resolvedDestination(pool, j.id, 'drive')).to.deep.include({ destination, source: null });
      expect(await resolvedDestination(pool, randomUUID(), 'drive')).to.equal(undefined);
    });
  });
});
