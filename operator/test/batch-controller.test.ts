// The MediaBatch controller on the local cluster with real Postgres and the
// scripted runner: a processing batch gets one MediaJob per episode, owned
// by the MediaBatch, a page at a time; a paused one gets none until it is
// started; the row's counts show in `kubectl get mb` and `describe`; a
// MediaBatch applied with kubectl is expanded from its show's feed (a fake
// lookup API and a local RSS feed) and recorded for its owner; an invalid
// owner is rejected once.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { getBatch, insertBatch, startBatch, type NewBatch, type NewEpisode } from '@mediajobs/lib/db/batches';
import { listJobs } from '@mediajobs/lib/db/jobs';
import { SecretBox } from '@mediajobs/lib/secret-box';
import {
  API_VERSION, GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob,
} from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { buildFeed, lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const CRDS = ['mediajob.yaml', 'mediabatch.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));
const SHARED = {
  format: 'm4a', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: true,
  downloadSubtitles: false, downloadThumbnail: true, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
} as NewBatch['options'];

describe('MediaBatch controller on the local cluster', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let apiKeyId: string;
  let platform: FakePlatform;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  const secretKeys = SecretBox.generateSpec('t1');
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = (env: Record<string, string> = {}) => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys, ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', MAX_RUNNING_JOBS: '20',
    BATCH_STATUS_SECONDS: '1', PODCAST_LOOKUP_ENDPOINT: platform.lookupEndpoint, OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', ...env,
  }), { log, storage: storage.access });

  const episodeJobs = async (batchName: string) => {
    const list = await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL }) as { items: MediaJob[] };
    return list.items.filter((mj) => (mj.metadata as k8s.V1ObjectMeta).ownerReferences?.some((o) => o.kind === 'MediaBatch' && o.name === batchName));
  };
  const getMb = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, name })) as MediaBatch;
  const createMb = (mb: MediaBatch) => custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, body: mb });

  /** A batch the gateway would have made: its row (episodes included), then its MediaBatch named after it. */
  async function gatewayBatch(n: number, opts: { paused?: boolean; kind?: 'show' | 'playlist'; sleepMs?: number } = {}) {
    const id = randomUUID();
    const kind = opts.kind ?? 'show';
    const eps: NewEpisode[] = Array.from({ length: n }, (_x, i) => ({
      id: randomUUID(),
      url: `http://scripted.invalid/complete?sleepMs=${opts.sleepMs ?? 100}&ep=${i}`,
      info: { title: `Episode ${i}`, description: `<p>Notes ${i}</p>`, releaseDate: `2024-05-0${(i % 9) + 1}T06:00:00.000Z`, thumbnailUrl: `https://img.test/ep${i}.jpg` },
    }));
    const showUrl = kind === 'show' ? 'https://podcasts.apple.com/us/podcast/the-show/id1000001' : 'https://www.youtube.com/playlist?list=PLabcdefghijkl';
    expect(await insertBatch(db.pool, {
      id, apiKeyId, kind, showUrl, folder: 'shows/the-show', paused: opts.paused ?? false, webhookUrl: null,
      crNamespace: 'default', crName: id, options: SHARED, target: { kind: 'given', destination: { type: 'managed' } },
    }, eps)).to.include({ outcome: 'inserted' });
    // The operator's materializer creates its MediaBatch from the row, as for a batch from POST /jobs.
    const mb = await eventually(() => getMb(id), 10_000);
    expect(mb.spec).to.deep.include({ batchId: id, showUrl, kind, owner: { apiKeyId }, folder: 'shows/the-show', paused: kind === 'show' && (opts.paused ?? false) });
    return { id, eps };
  }

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    for (const crd of CRDS) await tc.kubectl(['apply', '-f', crd]);
    db = await createTestDatabase();
    storage = new TestLocalStorage();
    apiKeyId = await insertApiKey(db.pool);
    platform = await startFakePlatform();
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  afterEach(async () => {
    await operator?.stop();
    operator = undefined;
  });

  after(async () => {
    await platform.stop();
    await db.drop();
    await tc.stop();
    storage?.remove();
  });

  it('creates one MediaJob per episode of a processing show, a page per pass, and completes the batch', async () => {
    // 1 per second with pages of 3: the first 3 at once, the next page about 3 s later.
    operator = await start({ BATCH_CREATE_PER_SECOND: '1', BATCH_CREATE_PAGE: '3' });
    const { id, eps } = await gatewayBatch(5);
    const all = await eventually(async () => {
      const mjs = await episodeJobs(id);
      return mjs.length === 5 ? mjs : undefined;
    }, 30_000);
    // Read from the objects' creation times (whole seconds), not from when this test happened to look:
    // the first page together, the next one only once the rate gave it 3 more creations, about 3 s later.
    const created = all.map((x) => Date.parse(x.metadata.creationTimestamp!)).sort((a, b) => a - b);
    expect(created[2]! - created[0]!, 'the first page at once').to.be.at.most(1000);
    expect(created[3]! - created[0]!, 'the second page waits for the rate').to.be.at.least(2000);
    const mb = await getMb(id);
    const mj = all.find((x) => x.metadata.name === eps[1]!.id)!;
    expect((mj.metadata as k8s.V1ObjectMeta).ownerReferences).to.deep.equal([{
      apiVersion: API_VERSION, kind: 'MediaBatch', name: id, uid: mb.metadata.uid, controller: true, blockOwnerDeletion: true,
    }]);
    expect(mj.metadata.labels).to.include({ 'mediajobs.io/batch': id, 'mediajobs.io/batch-id': id, 'mediajobs.io/api-key-id': apiKeyId });
    expect(mj.spec).to.deep.include({
      jobId: eps[1]!.id, batchId: id, showEpisode: true, url: eps[1]!.url, folder: 'shows/the-show', format: 'm4a', audioOnly: true,
      downloadThumbnail: true, owner: { apiKeyId },
      // The feed's word for the runner; no description (null for podcast sources).
      episode: { title: 'Episode 1', releaseDate: '2024-05-02T06:00:00.000Z', thumbnailUrl: 'https://img.test/ep1.jpg' },
    });
    // The rows know their MediaJobs, so no episode is created twice.
    const rows = await db.pool.query('SELECT cr_namespace, cr_name FROM jobs WHERE batch_id = $1', [id]);
    expect(rows.rows.every((r: { cr_name: string | null }) => r.cr_name !== null)).to.equal(true);

    const done = await eventually(async () => {
      const s = (await getMb(id)).status;
      return s?.status === 'completed' ? s : undefined;
    }, 60_000);
    expect(done).to.deep.include({
      batchId: id, status: 'completed', totalEpisodes: 5, completedEpisodes: 5, failedEpisodes: 0, skippedEpisodes: 0, done: '5/5',
      episodeJobs: eps.map((e) => e.id),
    });
    expect(done.conditions!.map((c) => [c.type, c.status, c.reason])).to.deep.equal([
      ['Accepted', 'True', 'Recorded'], ['EpisodesCreated', 'True', 'AllCreated'], ['Complete', 'True', 'Completed'],
    ]);
    const table = (await tc.kubectl(['get', 'mb', id])).stdout.trim().split('\n').map((l) => l.split(/\s{2,}/));
    expect(table[0]).to.deep.equal(['NAME', 'STATUS', 'DONE', 'FAILED', 'AGE']);
    expect(table[1]!.slice(0, 4)).to.deep.equal([id, 'completed', '5/5', '0']);
    const described = (await tc.kubectl(['describe', 'mb', id])).stdout;
    expect(described).to.match(/All 5 episodes completed/);
    // Events are written in the background, just after the status.
    const events = await eventually(async () => {
      const out = (await tc.kubectl(['describe', 'mb', id])).stdout;
      return /Completed/.test(out.slice(out.indexOf('Events:'))) ? out.slice(out.indexOf('Events:')) : undefined;
    });
    expect(events).to.match(/Normal\s+Expanded\s+.*Batch .*: 5 episodes/);
    expect(events).to.match(/Normal\s+EpisodesCreated\s+.*5 episode MediaJobs created/);
    expect(events).to.match(/Normal\s+Completed\s+.*All 5 episodes completed/);
  });

  it('marks playlist videos as no show episodes: no episode metadata, no thumbnail', async () => {
    operator = await start();
    const { id } = await gatewayBatch(2, { kind: 'playlist' });
    const mjs = await eventually(async () => {
      const x = await episodeJobs(id);
      return x.length === 2 ? x : undefined;
    });
    for (const mj of mjs) {
      expect(mj.spec).not.to.have.property('showEpisode');
      expect(mj.spec).not.to.have.property('episode');
    }
  });

  it('creates nothing for a paused batch until it is started', async () => {
    operator = await start();
    const { id } = await gatewayBatch(3, { paused: true });
    const paused = await eventually(async () => {
      const s = (await getMb(id)).status;
      return s?.status === 'paused' ? s : undefined;
    });
    expect(paused).to.include({ done: '0/3', totalEpisodes: 3 });
    expect(paused.conditions!.find((c) => c.type === 'EpisodesCreated')).to.include({ status: 'False', reason: 'Paused' });
    await new Promise((r) => setTimeout(r, 1500));
    expect(await episodeJobs(id)).to.have.length(0);

    // POST /batch/{id}/start moves only the row, the truth of a gateway
    // batch: its episodes start, and the object is unpaused to say so.
    expect(await startBatch(db.pool, id, apiKeyId)).to.deep.equal({ outcome: 'started', startedJobs: 3 });
    await eventually(async () => (await episodeJobs(id)).length === 3, 10_000);
    await eventually(async () => (await getMb(id)).spec.paused === false, 10_000);
    await eventually(async () => (await getMb(id)).status?.status === 'completed', 60_000);
  });

  it('holds a paused MediaBatch applied with kubectl, with its own episode list, until its spec unpauses it', async () => {
    operator = await start();
    const renamed = randomUUID();
    await createMb({
      apiVersion: API_VERSION, kind: 'MediaBatch', metadata: { name: 'listed', namespace: 'default' },
      spec: {
        showUrl: 'https://podcasts.apple.com/us/podcast/listed/id4000004', owner: { apiKeyId }, paused: true,
        episodes: [
          { url: 'http://scripted.invalid/complete?sleepMs=50&n=1', title: 'One', releaseDate: '2024-01-01T00:00:00.000Z', jobId: renamed, filename: 'one-renamed' },
          { url: 'http://scripted.invalid/fail?n=2', title: 'Two' },
        ],
      } as MediaBatch['spec'],
    });
    const uid = (await getMb('listed')).metadata.uid!;
    const row = await eventually(async () => getBatch(db.pool, uid));
    // The listed episodes, not the feed: the lookup API was never asked.
    expect(row).to.deep.include({ status: 'paused', kind: 'show', total_episodes: 2 });
    expect(row.episode_jobs[0]).to.equal(renamed);
    expect(platform.requests.some((r) => r.includes('4000004'))).to.equal(false);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await episodeJobs('listed')).to.have.length(0);
    expect((await getMb('listed')).status).to.include({ status: 'paused', done: '0/2' });

    await custom.patchNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, name: 'listed', body: { spec: { paused: false } },
    }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    const mjs = await eventually(async () => {
      const x = await episodeJobs('listed');
      return x.length === 2 ? x : undefined;
    }, 10_000);
    expect(mjs.find((mj) => mj.metadata.name === renamed)!.spec).to.deep.include({ filename: 'one-renamed', episode: { title: 'One', releaseDate: '2024-01-01T00:00:00.000Z' } });
    const s = await eventually(async () => {
      const x = (await getMb('listed')).status;
      return x?.status === 'finished' ? x : undefined;
    }, 60_000);
    expect(s).to.include({ done: '2/2', completedEpisodes: 1, failedEpisodes: 1, skippedEpisodes: 0 });
    expect(s.conditions!.find((c) => c.type === 'Complete')).to.include({ status: 'True', reason: 'Finished', message: '2 episodes done: 1 completed, 1 failed' });
  });

  it('records a MediaBatch applied with kubectl for its owner, from the show\'s feed, and runs it', async () => {
    platform.routes.set('/feed.xml', serve(buildFeed({
      title: 'Applied Show',
      image: 'https://img.test/show.jpg',
      items: [
        { title: 'Second', pubDate: 'Tue, 05 Mar 2024 09:30:00 -0500', enclosure: { url: 'http://scripted.invalid/complete?sleepMs=50&n=2' }, image: 'https://img.test/ep2.jpg' },
        { title: 'First', description: 'Notes', pubDate: 'Fri, 01 Mar 2024 06:00:00 +0000', enclosure: { url: 'http://scripted.invalid/complete?sleepMs=50&n=1' } },
      ],
    })));
    platform.shows.set('2000002', lookupResult('2000002', `${platform.baseUrl}/feed.xml`, 'Applied Show'));
    operator = await start();
    await tc.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: API_VERSION, kind: 'MediaBatch', metadata: { name: 'applied-show', namespace: 'default' },
        spec: { showUrl: 'https://podcasts.apple.com/us/podcast/applied/id2000002', owner: { apiKeyId }, folder: 'gitops', options: { audioOnly: true, downloadThumbnail: true } },
      }),
    });
    const uid = (await getMb('applied-show')).metadata.uid!;
    const row = await eventually(async () => getBatch(db.pool, uid));
    expect(row).to.deep.include({ api_key_id: apiKeyId, kind: 'show', total_episodes: 2, folder: 'gitops', cr_name: 'applied-show' });
    const mjs = await eventually(async () => {
      const x = await episodeJobs('applied-show');
      return x.length === 2 ? x : undefined;
    });
    const byTitle = new Map(mjs.map((mj) => [mj.spec.episode?.title, mj]));
    expect(byTitle.get('Second')!.spec).to.deep.include({
      batchId: uid, showEpisode: true, folder: 'gitops', format: 'm4a',
      episode: { title: 'Second', releaseDate: '2024-03-05T14:30:00.000Z', thumbnailUrl: 'https://img.test/ep2.jpg' },
    });
    // The show's artwork stands in for an episode without its own.
    expect(byTitle.get('First')!.spec.episode).to.deep.include({ thumbnailUrl: 'https://img.test/show.jpg' });
    const done = await eventually(async () => {
      const s = (await getMb('applied-show')).status;
      return s?.status === 'completed' ? s : undefined;
    }, 60_000);
    expect(done).to.include({ batchId: uid, done: '2/2' });
    // The owner's API sees the episodes as its jobs.
    const listed = await listJobs(db.pool, apiKeyId, { limit: 100, offset: 0 });
    const ids = JSON.stringify(listed);
    for (const id of row.episode_jobs) expect(ids).to.contain(id);
  });

  it('rejects a MediaBatch whose owner is not an active key, once, and records nothing', async () => {
    platform.routes.set('/feed3.xml', serve(buildFeed({
      title: 'Orphan Show', items: [{ title: 'Only', pubDate: 'Fri, 01 Mar 2024 06:00:00 +0000', enclosure: { url: 'http://scripted.invalid/complete' } }],
    })));
    platform.shows.set('3000003', lookupResult('3000003', `${platform.baseUrl}/feed3.xml`));
    operator = await start({ RESYNC_SECONDS: '1' });
    await createMb({
      apiVersion: API_VERSION, kind: 'MediaBatch', metadata: { name: 'orphan', namespace: 'default' },
      spec: { showUrl: 'https://podcasts.apple.com/podcast/id3000003', owner: { apiKeyId: randomUUID() } } as MediaBatch['spec'],
    });
    const accepted = await eventually(async () => (await getMb('orphan')).status?.conditions?.find((c) => c.type === 'Accepted'));
    expect(accepted).to.include({ status: 'False', reason: 'InvalidOwner', message: 'spec.owner.apiKeyId does not name an active API key' });
    const lookups = () => platform.requests.filter((r) => r.includes('id=3000003')).length;
    const before = lookups();
    // Resyncs pass over it every second: nothing is fetched or written again.
    await new Promise((r) => setTimeout(r, 2500));
    expect(lookups()).to.equal(before);
    const again = (await getMb('orphan')).status!.conditions!.find((c) => c.type === 'Accepted');
    expect(again!.lastTransitionTime).to.equal(accepted.lastTransitionTime);
    expect(await getBatch(db.pool, (await getMb('orphan')).metadata.uid!)).to.equal(undefined);
    expect(await episodeJobs('orphan')).to.have.length(0);
  });

  it('gives a 500-episode show all its MediaJobs at the default rate, in pages (the 10 s goal is api-gateway/bench/batches.ts\'s)', async () => {
    operator = await start({ MAX_RUNNING_JOBS: '1' });
    const started = Date.now();
    const { id } = await gatewayBatch(500, { sleepMs: 60_000 });
    const seen: { n: number; from: number; to: number }[] = [];
    await eventually(async () => {
      const from = Date.now();
      const n = (await episodeJobs(id)).length;
      if (seen.at(-1)?.n !== n) seen.push({ n, from, to: Date.now() });
      return n === 500;
    }, 15_000, 200);
    const ms = Date.now() - started;
    console.log(`      500 episode MediaJobs in ${ms} ms (counts seen: ${seen.map((c) => c.n).join(' ')})`);
    // The token bucket's bound between two looks, however long a look took on a loaded machine: at most a
    // page (BATCH_CREATE_PAGE 100) plus the refill (BATCH_CREATE_PER_SECOND 50) over the longest time
    // the two snapshots can be apart (from the start of the one look to the end of the other).
    for (let i = 1; i < seen.length; i++) {
      const seconds = (seen[i]!.to - seen[i - 1]!.from) / 1000;
      expect(seen[i]!.n - seen[i - 1]!.n, `between looks ${seconds} s apart`).to.be.at.most(100 + Math.ceil(50 * seconds));
    }
    await eventually(async () => (await getMb(id)).status?.conditions?.find((c) => c.type === 'EpisodesCreated')?.status === 'True', 5_000);
    // They would hold the runner slots of whatever runs next.
    await tc.kubectl(['delete', 'mj', '-l', `mediajobs.io/batch-id=${id}`, '--wait=false']);
  });
});
