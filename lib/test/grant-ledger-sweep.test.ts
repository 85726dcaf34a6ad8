// The upload-grant ledger forgets what the grants of jobs that ended long
// ago did (issue 35, docs/adr/0012 "Bounds"): the broker, whose tables they
// are, deletes those rows (and their parts) beside a request, at most every
// LEDGER_SWEEP_SECONDS; a running job's rows and a recently ended one's stay.
// Real Postgres, the broker's own ledger; the bucket is never reached.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { PgGrantLedger } from '../src/storage/grant-ledger.js';
import { LEDGER_KEEP_SECONDS, LEDGER_SWEEP_SECONDS, UploadGrantBroker, UploadGrantKeys, type GrantStore } from '../src/storage/upload-grants.js';
import { SecretBox } from '../src/secret-box.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { eventually } from '../../local-cluster/test/support.js';

describe('upload-grant ledger: rows of jobs that ended long ago are deleted by the broker', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let apiKeyId: string;

  before(async () => {
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
  });
  after(async () => {
    await db?.drop();
  });

  /** A job row, ended `endedSecondsAgo` ago (running without), and one object its grant stored with two parts signed. */
  const jobWithUpload = async (endedSecondsAgo?: number) => {
    const id = randomUUID();
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, finished_at)
       VALUES ($1, $2, 'https://media.test/talk', $3, 'Finished', 100, '{}', 'mediajobs', $5, now() - make_interval(secs => $4))`,
      [id, apiKeyId, endedSecondsAgo === undefined ? 'Processing' : 'Completed', endedSecondsAgo ?? null, id]);
    const { rows: [u] } = await db.pool.query<{ id: string }>(
      `INSERT INTO grant_uploads (grant_id, job_id, key, upload_id, state, size, completed_at)
       VALUES ($1, $2, $3, 'u1', 'completed', 10, now()) RETURNING id`, [`g-${id}`, id, `videos/${id}.mp4`]);
    await db.pool.query('INSERT INTO grant_parts (upload, number, bytes) VALUES ($1, 1, 5), ($1, 2, 5)', [u!.id]);
    return id;
  };
  const rowsOf = async (jobId: string) => (await db.pool.query<{ uploads: number; parts: number }>(
    `SELECT (SELECT count(*)::int FROM grant_uploads WHERE job_id = $1) AS uploads,
            (SELECT count(*)::int FROM grant_parts p JOIN grant_uploads u ON u.id = p.upload WHERE u.job_id = $1) AS parts`, [jobId])).rows[0];

  it('forgetEnded deletes the rows and parts of jobs ended over the keep time, and no others', async () => {
    const old = await jobWithUpload(LEDGER_KEEP_SECONDS + 60);
    const recent = await jobWithUpload(60);
    const running = await jobWithUpload();
    const ledger = new PgGrantLedger(db.pool);
    expect(await ledger.forgetEnded(LEDGER_KEEP_SECONDS, 1000)).to.be.at.least(1);
    expect(await rowsOf(old)).to.deep.equal({ uploads: 0, parts: 0 });
    expect(await rowsOf(recent)).to.deep.equal({ uploads: 1, parts: 2 });
    expect(await rowsOf(running)).to.deep.equal({ uploads: 1, parts: 2 });
    expect((await ledger.storedBy([`videos/${recent}.mp4`])).get(`videos/${recent}.mp4`)).to.deep.equal({ jobId: recent, size: 10 });
  });

  it('the broker sweeps beside a request, even a refused one, and not again within LEDGER_SWEEP_SECONDS', async () => {
    let clock = Date.now();
    const store = {} as GrantStore; // never reached: every request below is refused before the bucket
    const broker = new UploadGrantBroker({
      store, keys: new UploadGrantKeys(SecretBox.generateSpec('t1')), jobs: async () => undefined, ledger: new PgGrantLedger(db.pool), now: () => clock,
    });
    const first = await jobWithUpload(LEDGER_KEEP_SECONDS + 60);
    await broker.handle('check', 'not-a-token', {}).catch(() => undefined);
    await eventually(async () => (await rowsOf(first))!.uploads === 0, 10_000);

    const second = await jobWithUpload(LEDGER_KEEP_SECONDS + 60);
    clock += (LEDGER_SWEEP_SECONDS - 1) * 1000;
    await broker.handle('check', 'not-a-token', {}).catch(() => undefined);
    // A sweep, had there been one, runs beside the request: give it the time one takes.
    await new Promise((r) => setTimeout(r, 300));
    expect(await rowsOf(second), 'within the interval: not swept').to.deep.equal({ uploads: 1, parts: 2 });
    clock += 2000;
    await broker.handle('check', 'not-a-token', {}).catch(() => undefined);
    await eventually(async () => (await rowsOf(second))!.uploads === 0, 10_000);
  });
});
