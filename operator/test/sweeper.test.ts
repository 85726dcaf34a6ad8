// The sweeper creates what the gateway wrote to Postgres but failed to
// create in the cluster: a stranded job's MediaJob, a stranded batch's
// MediaBatch (as the gateway would have built it), each exactly once.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { insertBatch, strandedBatches, type NewBatch } from '@mediajobs/lib/db/batches';
import { strandedPending } from '@mediajobs/lib/db/jobs';
import { ORGANIZATION_LABEL } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { Sweeper } from '../src/sweeper.js';

const CRDS = ['mediajob.yaml', 'mediabatch.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));
const SHARED = {
  format: 'm4a', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: true,
  downloadSubtitles: false, downloadThumbnail: true, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
} as NewBatch['options'];

describe('operator: the sweeper of stranded rows', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;

  before(async () => {
    tc = await startTestCluster();
    for (const crd of CRDS) await tc.kubectl(['apply', '-f', crd]);
    db = await createTestDatabase();
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  after(async () => {
    await db?.drop();
    await tc?.stop();
  });

  const sweeper = (cached: Set<string>) => new Sweeper({
    rows: { jobs: (s) => strandedPending(db.pool, s), batches: (s) => strandedBatches(db.pool, s) },
    custom,
    caches: { hasMediaJob: (ns, name) => cached.has(`${ns}/${name}`), hasMediaBatch: (ns, name) => cached.has(`${ns}/${name}`) },
    log: pino({ level: 'silent' }),
    afterSeconds: 1,
  });

  it('creates the MediaBatch of a paused show the gateway recorded but could not create, once, as the gateway builds it', async () => {
    const apiKeyId = await insertApiKey(db.pool);
    const id = randomUUID();
    const showUrl = 'https://podcasts.apple.com/us/podcast/the-show/id1000001';
    expect(await insertBatch(db.pool, {
      id, apiKeyId, kind: 'show', showUrl, folder: 'shows/the-show', paused: true, webhookUrlEnc: null,
      crNamespace: 'default', crName: id, options: SHARED, target: { kind: 'given', destination: { type: 'managed' } },
    }, [{ id: randomUUID(), url: 'http://feeds.invalid/ep0.mp3' }, { id: randomUUID(), url: 'http://feeds.invalid/ep1.mp3' }])).to.include({ outcome: 'inserted' });
    await db.pool.query(`UPDATE batches SET created_at = now() - interval '1 minute' WHERE id = $1`, [id]);

    expect(await sweeper(new Set()).sweep()).to.equal(1);
    const mb = await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, name: id }) as MediaBatch;
    expect(mb.spec).to.deep.include({ batchId: id, showUrl, kind: 'show', owner: { apiKeyId }, folder: 'shows/the-show', paused: true });
    expect(mb.spec.options).to.include({ format: 'm4a', downloadThumbnail: true });
    expect(mb.spec.options).to.not.have.any.keys('url', 'filename', 'folder');

    expect(await sweeper(new Set()).sweep(), 'already there: AlreadyExists, not a second one').to.equal(0);
    expect(await sweeper(new Set([`default/${id}`])).sweep(), 'in the cache: not even tried').to.equal(0);
  });

  it("labels what it creates with the owning key's organization, as the gateway does (fair admission caps by it)", async () => {
    const org = (await db.pool.query<{ id: string }>(`INSERT INTO organizations (name) VALUES ('swept') RETURNING id`)).rows[0]!.id;
    const apiKeyId = await insertApiKey(db.pool, 'org key');
    await db.pool.query('UPDATE api_keys SET organization_id = $2 WHERE id = $1', [apiKeyId, org]);
    const jobId = randomUUID();
    await db.pool.query(`INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, created_at)
      VALUES ($1, $2, 'https://media.example/v', 'Pending', 'Queued', 0, '{"url":"https://media.example/v"}', 'default', $3, now() - interval '1 minute')`,
    [jobId, apiKeyId, jobId]);
    const batchId = randomUUID();
    expect(await insertBatch(db.pool, {
      id: batchId, apiKeyId, kind: 'playlist', showUrl: 'https://www.youtube.com/playlist?list=PLx', folder: null, paused: false, webhookUrlEnc: null,
      crNamespace: 'default', crName: batchId, options: SHARED, target: { kind: 'given', destination: { type: 'managed' } },
    }, [{ id: randomUUID(), url: 'https://www.youtube.com/watch?v=a' }])).to.include({ outcome: 'inserted' });
    await db.pool.query(`UPDATE batches SET created_at = now() - interval '1 minute' WHERE id = $1`, [batchId]);

    expect(await sweeper(new Set()).sweep()).to.equal(2);
    const get = (plural: string, name: string) => custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural, name });
    expect(((await get(MEDIAJOB_PLURAL, jobId)) as MediaJob).metadata.labels).to.deep.include({ [ORGANIZATION_LABEL]: org });
    expect(((await get(MEDIABATCH_PLURAL, batchId)) as MediaBatch).metadata.labels).to.deep.include({ [ORGANIZATION_LABEL]: org });
  });
});
