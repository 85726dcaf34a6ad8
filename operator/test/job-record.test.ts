// The status mirror against real Postgres (ADR 0002): a pass writes the row
// only when the status it settles on differs from what the row shows. The
// first pass over a job the gateway just accepted (Pending, Queued, 0) is
// the common case at load, and writes nothing; every later transition is
// mirrored. "Written" is judged by the row's xmin, which any UPDATE changes.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import type { MediaJob, MediaJobOptions, MediaJobStatus, Owned } from '@mediajobs/lib/mediajob/types';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { JobDestinations } from '../src/destinations.js';
import { JobRecord } from '../src/job-record.js';

const OPTIONS: MediaJobOptions = {
  url: 'http://127.0.0.1:9/video.mp4', format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
  audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
};

describe('operator: the status mirror writes only what the row does not show', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let apiKeyId: string;
  let record: JobRecord;

  before(async () => {
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    const secretKeys = SecretBox.generateSpec('t1');
    const box = new SecretBox(secretKeys);
    const cfg = loadOperatorConfig({ DATABASE_URL: db.url, SECRET_KEYS: secretKeys });
    // Never contacted here: every job is on managed storage and none completes.
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:9', skipTLSVerify: false }], users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
    });
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const destinations = new JobDestinations(core, db.pool, box, () => ({ provider: 'managed' }), cfg);
    record = new JobRecord({ pool: db.pool, box, storage: { presign: async (k) => k, destination: () => ({ provider: 'managed' }) }, destinations, log: pino({ level: 'silent' }) });
  });
  after(() => db?.drop());

  /** A row as POST /jobs commits it, and the MediaJob made from it. */
  async function accepted(): Promise<Owned<MediaJob>> {
    const id = randomUUID();
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, created_at)
       VALUES ($1, $2, $3, 'Pending', 'Queued', 0, $4, 'default', $5, now())`, [id, apiKeyId, OPTIONS.url, JSON.stringify(OPTIONS), id]);
    return { ...buildMediaJob({ jobId: id, apiKeyId, namespace: 'default', options: OPTIONS }), metadata: { name: id, namespace: 'default', uid: randomUUID() } } as Owned<MediaJob>;
  }
  const rowOf = async (id: string) => (await db.pool.query<{ xmin: string; status: string; step: string; started_at: Date | null }>(
    'SELECT xmin::text, status, step, started_at FROM jobs WHERE id = $1', [id])).rows[0]!;

  it('leaves the row of a just-accepted job alone when admitted, then mirrors Processing and its start', async () => {
    const mj = await accepted();
    const id = mj.spec.jobId!;
    const key = `default/${id}`;
    const before = await rowOf(id);
    expect(await record.ensureRecorded(key, mj)).to.equal(undefined);
    const admitted: MediaJobStatus = { jobId: id, status: 'Pending', step: 'Queued', progress: 0, jobName: `${id}-runner` };
    expect(await record.sync(key, mj, admitted)).to.equal(undefined);
    expect((await rowOf(id)).xmin, 'no write: the row shows this already').to.equal(before.xmin);
    await record.sync(key, mj, { ...admitted, status: 'Processing', step: 'Downloading', startTime: '2026-11-27T10:00:00Z' });
    const processing = await rowOf(id);
    expect(processing).to.include({ status: 'Processing', step: 'Downloading' });
    expect(processing.started_at?.toISOString()).to.equal('2026-11-27T10:00:00.000Z');
  });

  it('writes a first pass that shows something the row does not: a job waiting for a slot says why', async () => {
    const mj = await accepted();
    const id = mj.spec.jobId!;
    const key = `default/${id}`;
    const before = await rowOf(id);
    await record.ensureRecorded(key, mj);
    await record.sync(key, mj, { jobId: id, status: 'Pending', step: 'Queued', progress: 0, reason: 'waiting_for_capacity' });
    expect((await rowOf(id)).xmin).not.to.equal(before.xmin);
    expect((await db.pool.query('SELECT reason FROM jobs WHERE id = $1', [id])).rows[0]).to.deep.equal({ reason: 'waiting_for_capacity' });
  });

  it('after a restart, leaves a row that shows the status already, and mirrors one that does not', async () => {
    const mj = await accepted();
    const id = mj.spec.jobId!;
    const key = `default/${id}`;
    await record.ensureRecorded(key, mj);
    const processing: MediaJobStatus = { jobId: id, status: 'Processing', step: 'Muxing', progress: 50 };
    await record.sync(key, mj, processing);
    const written = await rowOf(id);
    // A new operator: nothing in memory.
    record.forget(key);
    await record.ensureRecorded(key, mj);
    await record.sync(key, mj, processing);
    expect((await rowOf(id)).xmin, 'the same status again').to.equal(written.xmin);
    await record.sync(key, mj, { ...processing, progress: 60 });
    expect((await rowOf(id)).xmin).not.to.equal(written.xmin);
  });
});
