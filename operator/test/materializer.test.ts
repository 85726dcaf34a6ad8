// The materializer: the one path from an accepted row to its custom resource
// (docs/adr/0017). Real Postgres (LISTEN/NOTIFY), the local cluster (its
// CRD validation and its API Priority and Fairness throttle), the official
// client. Rows are accepted as the gateway accepts them: committed, then
// the gateway's poke. The safety pass is set to an hour, so anything
// created promptly was woken by a poke.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { insertBatch, startBatch, type NewBatch } from '@mediajobs/lib/db/batches';
import { cancelJob } from '@mediajobs/lib/db/jobs';
import { materializePoke } from '@mediajobs/lib/db/materialize';
import { ORGANIZATION_LABEL } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { newRegistry } from '@mediajobs/lib/metrics';
import { captureLogger } from '../../api-gateway/test/support.js';
import { eventually, startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { Materializer, type MaterializerOptions } from '../src/materializer.js';
import { OperatorMetrics } from '../src/metrics.js';

const CRDS = ['mediajob.yaml', 'mediabatch.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));
const SHARED = {
  format: 'm4a', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: true,
  downloadSubtitles: false, downloadThumbnail: true, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
} as NewBatch['options'];
const HOUR = 3600;

describe('operator: the materializer of accepted rows', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let running: Materializer[] = [];
  /** The gateway's wake-up after its commits. */
  let poke: () => void;

  before(async () => {
    tc = await startTestCluster();
    for (const crd of CRDS) await tc.kubectl(['apply', '-f', crd]);
    db = await createTestDatabase();
    poke = materializePoke(db.pool);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  afterEach(async () => {
    await Promise.all(running.map((m) => m.stop()));
    running = [];
    tc.cluster.throttleWrites(undefined);
  });

  after(async () => {
    await db?.drop();
    await tc?.stop();
  });

  interface Started { m: Materializer; started: string[]; logs: ReturnType<typeof captureLogger>; metrics: OperatorMetrics }

  async function start(opts: Partial<MaterializerOptions> = {}, cached = new Set<string>(), api: k8s.CustomObjectsApi = custom): Promise<Started> {
    const started: string[] = [];
    const logs = captureLogger('info');
    const metrics = new OperatorMetrics(newRegistry());
    const m = new Materializer({
      pool: db.pool, databaseUrl: db.url, custom: api, log: logs.logger, metrics,
      caches: { hasMediaJob: (ns, name) => cached.has(`${ns}/${name}`), hasMediaBatch: (ns, name) => cached.has(`${ns}/${name}`) },
      onBatchStarted: (ns, name) => started.push(`${ns}/${name}`),
      opts: { perSecond: 1000, page: 100, concurrency: 8, safetySeconds: HOUR, ...opts },
    });
    running.push(m);
    await m.start();
    return { m, started, logs, metrics };
  }

  /** A row as POST /jobs writes it (the gateway's insert is tested in lib; here only what the materializer reads). */
  async function acceptJob(apiKeyId: string, options: Record<string, unknown> = { url: 'https://media.example/v' }, id = randomUUID()): Promise<string> {
    await db.pool.query(`INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, destination)
      VALUES ($1, $2, 'https://media.example/v', 'Pending', 'Queued', 0, $3, 'default', $4, '{"type":"managed"}')`, [id, apiKeyId, JSON.stringify(options), id]);
    poke();
    return id;
  }

  const getJob = (name: string) => custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name }) as Promise<MediaJob>;
  const getBatch = (name: string) => custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, name }) as Promise<MediaBatch>;
  const marked = async (table: 'jobs' | 'batches', id: string) =>
    (await db.pool.query<{ at: Date | null }>(`SELECT cr_created_at AS at FROM ${table} WHERE id = $1`, [id])).rows[0]?.at ?? null;
  const jobsOfKey = async (apiKeyId: string) => ((await custom.listNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, labelSelector: `mediajobs.io/api-key-id=${apiKeyId}`,
  })) as { items: MediaJob[] }).items;

  it('creates the MediaJob of a committed row at once (woken by the poke after its commit), labelled with its organization, and marks the row', async () => {
    const org = (await db.pool.query<{ id: string }>(`INSERT INTO organizations (name) VALUES ('materialized') RETURNING id`)).rows[0]!.id;
    const apiKeyId = await insertApiKey(db.pool, 'org key');
    await db.pool.query('UPDATE api_keys SET organization_id = $2 WHERE id = $1', [apiKeyId, org]);
    await start();
    const id = await acceptJob(apiKeyId, { url: 'https://media.example/v', format: 'mp3', audioOnly: true });
    const mj = await eventually(() => getJob(id), 5_000);
    expect(mj.spec).to.deep.include({ jobId: id, owner: { apiKeyId }, url: 'https://media.example/v', format: 'mp3', destination: { type: 'managed' } });
    expect(mj.metadata.labels).to.deep.include({ [ORGANIZATION_LABEL]: org });
    await eventually(() => marked('jobs', id), 5_000);
  });

  it('creates a paused batch\'s MediaBatch paused, and hands the batch controller its start when the row is started', async () => {
    const s = await start();
    const apiKeyId = await insertApiKey(db.pool);
    const id = randomUUID();
    const showUrl = 'https://podcasts.apple.com/us/podcast/the-show/id1000001';
    expect(await insertBatch(db.pool, {
      id, apiKeyId, kind: 'show', showUrl, folder: 'shows/the-show', paused: true, webhookUrl: null,
      crNamespace: 'default', crName: id, options: SHARED, target: { kind: 'given', destination: { type: 'managed' } },
    }, [{ id: randomUUID(), url: 'http://feeds.invalid/ep0.mp3' }, { id: randomUUID(), url: 'http://feeds.invalid/ep1.mp3' }])).to.include({ outcome: 'inserted' });
    poke();
    const mb = await eventually(() => getBatch(id), 5_000);
    expect(mb.spec).to.deep.include({ batchId: id, showUrl, kind: 'show', owner: { apiKeyId }, folder: 'shows/the-show', paused: true });
    expect(mb.spec.options).to.include({ format: 'm4a', downloadThumbnail: true });
    expect(mb.spec.options).to.not.have.any.keys('url', 'filename', 'folder');
    expect(await jobsOfKey(apiKeyId), 'episodes are the batch controller\'s').to.have.length(0);
    await eventually(() => marked('batches', id), 5_000);

    expect(await startBatch(db.pool, id, apiKeyId)).to.include({ outcome: 'started' });
    await eventually(() => s.started.includes(`default/${id}`), 5_000);
  });

  it('finds rather than duplicates: an existing MediaJob (AlreadyExists) or one in the cache marks the row, and one object is left', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    // Created by an earlier pass that never marked its rows (an operator killed between the two).
    const existing = await acceptJob(apiKeyId);
    await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name: existing, labels: { 'mediajobs.io/api-key-id': apiKeyId } },
        spec: { jobId: existing, owner: { apiKeyId }, url: 'https://media.example/v', destination: { type: 'managed' } } } });
    const inCache = await acceptJob(apiKeyId);
    const s = await start({}, new Set([`default/${inCache}`]));
    await eventually(async () => (await marked('jobs', existing)) && (await marked('jobs', inCache)), 5_000);
    expect((await jobsOfKey(apiKeyId)).map((j) => j.metadata.name), 'the cached one was not created: it was taken as there').to.deep.equal([existing]);
    const text = await s.metrics.registry.metrics();
    expect(text).to.match(/mediajobs_materialized_total\{kind="MediaJob",result="found"\} 2/);
  });

  it('under the API server\'s 429s (API Priority and Fairness), waits as told and creates every row exactly once', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    tc.cluster.throttleWrites(10);
    const ids = await Promise.all(Array.from({ length: 40 }, () => acceptJob(apiKeyId)));
    const s = await start({ concurrency: 16 });
    await eventually(async () => (await db.pool.query(`SELECT 1 FROM jobs WHERE api_key_id = $1 AND cr_created_at IS NULL`, [apiKeyId])).rowCount === 0, 30_000, 200);
    expect(tc.cluster.throttledWrites, 'the throttle answered 429').to.be.greaterThan(0);
    expect((await jobsOfKey(apiKeyId)).map((j) => j.metadata.name).sort()).to.deep.equal([...ids].sort());
    expect(await s.metrics.registry.metrics()).to.match(/mediajobs_materialized_total\{kind="MediaJob",result="throttled"\} [1-9]/);
  });

  it('holds a row the API server refuses and goes on with the others; the row is retried, not lost', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    // Not what the gateway writes, but what a bad row looks like to the CRD's schema: the create is refused (422).
    const refused = await acceptJob(apiKeyId, { url: 'https://media.example/v', videoQuality: 'very high' });
    const fine = await acceptJob(apiKeyId);
    const s = await start();
    await eventually(() => marked('jobs', fine), 5_000);
    expect(await marked('jobs', refused)).to.equal(null);
    expect(s.logs.text()).to.include('could not create the resource of an accepted row');
    // Mended (an operator fixed the row): the held row's retry creates it.
    await db.pool.query(`UPDATE jobs SET options = options - 'videoQuality' WHERE id = $1`, [refused]);
    // Its hold doubles from 1 s while it keeps failing; a loaded machine may see it fail a few times before the mend.
    await eventually(() => marked('jobs', refused), 40_000, 100);
    expect((await getJob(refused)).spec.jobId).to.equal(refused);
  });

  it('retries a held row as soon as its hold runs out, even when the hold ran out during a long pass', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    const refused = await acceptJob(apiKeyId, { url: 'https://media.example/v', videoQuality: 'very high' });
    // Read after the refused row in the same pass, one at a time: the pass outlasts the refused row's first hold (1 s).
    await db.pool.query(`INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, destination)
      SELECT id, $1, 'https://media.example/v', 'Pending', 'Queued', 0, '{"url":"https://media.example/v"}', 'default', id::text, '{"type":"managed"}'
      FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, 1500)) g`, [apiKeyId]);
    const s = await start({ concurrency: 1, page: 2000 });
    const failures = async () => Number((await s.metrics.registry.metrics()).match(/mediajobs_materialized_total\{kind="MediaJob",result="failed"\} (\d+)/)?.[1] ?? 0);
    await eventually(async () => (await db.pool.query(`SELECT 1 FROM jobs WHERE api_key_id = $1 AND cr_created_at IS NULL`, [apiKeyId])).rowCount === 1, 30_000, 100);
    // The safety pass is an hour away: a second attempt comes only from the hold's own timer.
    await eventually(async () => (await failures()) >= 2, 10_000, 100);
    expect(await marked('jobs', refused)).to.equal(null);
  });

  it('listens again after its connection is lost, and catches up on what committed meanwhile', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    await start();
    const killed = await db.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'`);
    expect(killed.rowCount, 'the LISTEN connection').to.equal(1);
    const during = await acceptJob(apiKeyId);
    await eventually(() => marked('jobs', during), 10_000, 100);
    const after = await acceptJob(apiKeyId);
    await eventually(() => marked('jobs', after), 5_000);
  });

  it('creates every row of a burst of accepts, each poked (the pokes coalesce, none is lost)', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    await start();
    const ids = await Promise.all(Array.from({ length: 60 }, () => acceptJob(apiKeyId)));
    await eventually(async () => (await db.pool.query(`SELECT 1 FROM jobs WHERE api_key_id = $1 AND cr_created_at IS NULL`, [apiKeyId])).rowCount === 0, 10_000, 100);
    expect((await jobsOfKey(apiKeyId)).map((j) => j.metadata.name).sort()).to.deep.equal([...ids].sort());
  });

  it('stops only after the pass in flight, which marks what it created: nothing is left to touch the pool the operator ends next', async () => {
    const id = randomUUID();
    let entered = false;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    // An API server slow to answer this row (rows other tests left are created as they come).
    const slow = Object.create(custom) as k8s.CustomObjectsApi;
    slow.createNamespacedCustomObject = async (param) => {
      if ((param.body as MediaJob).metadata.name === id) {
        entered = true;
        await gate;
      }
      return custom.createNamespacedCustomObject(param);
    };
    const { m } = await start({}, new Set(), slow);
    await acceptJob(await insertApiKey(db.pool), undefined, id);
    await eventually(() => entered, 5_000, 10);
    let stopped = false;
    const stopping = m.stop().then(() => (stopped = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(stopped, 'stop() returned while its pass was still creating').to.equal(false);
    release();
    await stopping;
    expect(await marked('jobs', id), 'the created MediaJob marked before stop() returned').to.not.equal(null);
    expect((await getJob(id)).spec.jobId).to.equal(id);
  });

  it('does nothing for a row cancelled before its MediaJob was made', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    const id = await acceptJob(apiKeyId);
    expect(await cancelJob(db.pool, id, 'Cancelled', apiKeyId)).to.include({ outcome: 'cancelled' });
    const after = await acceptJob(apiKeyId);
    await start();
    await eventually(() => marked('jobs', after), 5_000);
    expect((await jobsOfKey(apiKeyId)).map((j) => j.metadata.name)).to.deep.equal([after]);
  });
});
