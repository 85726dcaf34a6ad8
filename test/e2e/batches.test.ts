// Batches through every component (issue 13): a podcast show (a fake of the
// platform's lookup API and an RSS feed on loopback whose enclosures are AAC
// files made with ffmpeg, with artwork) → POST /jobs → the batch row and its
// MediaBatch → the operator's batch controller → one MediaJob per episode →
// the runner → managed storage → GET /batch/{id}, GET /jobs/{id} and the
// webhooks; a genuine playlist through MEDIA_INFO_URL_MAP; 501 entries
// refused with nothing written anywhere; a MediaBatch applied with kubectl;
// POST /jobs/bulk.
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import { buildFeed, feedOfSize, lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { eventually } from '../../local-cluster/test/support.js';
import { startMediaServer, unreachableUrl, type MediaServer } from '../support/media.js';
import { startPagesServer, type PagesServer } from '../support/media-pages.js';
import { startPodcastMediaServer, type PodcastMediaServer } from '../support/podcast-media.js';
import { startReceiver, startService, type Receiver, type Service } from './support.js';

type Json = Record<string, unknown>;

const showUrl = (id: string) => `https://podcasts.apple.com/us/podcast/show-${id}/id${id}`;
const SHOW = '1000000001';
const MIXED_SHOW = '1000000002';
const GITOPS_SHOW = '1000000003';
const TWIN_SHOW = '1000000004';
const BIG_SHOW = '1000000501';
const PL = 'PLBCF2DAC6FFB574DE';
const BIG_PL = 'PL0123456789abcdef501';
const canonical = (list: string) => `https://www.youtube.com/playlist?list=${list}`;
const ENDED = ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled'];

/** The show's two episodes as its feed gives them, newest first. */
const EPISODES = [
  { title: 'Ep. 2: <Loud> & "clear"', pubDate: 'Tue, 05 Mar 2024 09:30:00 -0500', releaseDate: '2024-03-05T14:30:00.000Z', rename: 'second episode' },
  { title: 'Ep. 1', pubDate: 'Fri, 01 Mar 2024 06:00:00 +0000', releaseDate: '2024-03-01T06:00:00.000Z', rename: 'first episode' },
];

describe('end to end: batches (shows, playlists, bulk)', function () {
  this.timeout(180_000);
  let svc: Service;
  let platform: FakePlatform;
  let podcast: PodcastMediaServer;
  let media: MediaServer;
  let pages: PagesServer;
  let receiver: Receiver;

  const batch = async (id: string) => (await svc.api('GET', `/batch/${id}`)).body;
  const waitForBatch = (id: string, statuses: string[], timeoutMs = 120_000) => eventually(async () => {
    const b = await batch(id);
    return statuses.includes(b.status as string) ? b : undefined;
  }, timeoutMs, 250);
  const waitForJob = (id: string) => eventually(async () => {
    const j = (await svc.api('GET', `/jobs/${id}`)).body;
    return ENDED.includes(j.status as string) ? j : undefined;
  }, 90_000, 250);
  const hooks = (pred: (h: Json) => boolean) => receiver.hooks.map((h) => h.body).filter(pred);
  /** The names of every MediaJob and MediaBatch in the cluster. */
  const clusterObjects = async () => (await svc.cluster.kubectl(['get', 'mj,mb', '-o', 'name'])).stdout.trim().split('\n').filter(Boolean);
  const count = async (table: 'jobs' | 'batches') => Number((await svc.db.pool.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);

  before(async () => {
    [platform, podcast, media, pages, receiver] = await Promise.all([
      startFakePlatform(), startPodcastMediaServer(), startMediaServer(), startPagesServer(), startReceiver(),
    ]);
    const show = (id: string, feed: string) => {
      platform.routes.set(`/feeds/${id}.xml`, serve(feed));
      platform.shows.set(id, lookupResult(id, `${platform.baseUrl}/feeds/${id}.xml`, `Show ${id}`));
    };
    show(SHOW, buildFeed({
      title: 'The End-to-End Show',
      image: podcast.showArtUrl,
      items: [
        {
          title: EPISODES[0]!.title, description: '<p>Notes with <b>HTML</b>.</p>', pubDate: EPISODES[0]!.pubDate,
          enclosure: { url: podcast.episodeUrl('ep1.m4a'), type: 'audio/x-m4a' }, image: podcast.episodeArtUrl, guid: 'e2e-2',
        },
        { title: EPISODES[1]!.title, description: 'Plain notes.', pubDate: EPISODES[1]!.pubDate, enclosure: { url: podcast.episodeUrl('ep2.m4a'), type: 'audio/x-m4a' }, guid: 'e2e-1' },
      ],
    }));
    show(MIXED_SHOW, buildFeed({
      title: 'A show with trouble',
      items: [
        { title: 'Fine', pubDate: 'Wed, 06 Mar 2024 10:00:00 GMT', enclosure: { url: podcast.episodeUrl('ep3.m4a'), type: 'audio/x-m4a' } },
        // A 404 is a content warning (unavailable), a refused connection a technical failure: both count as failed.
        { title: 'Gone', pubDate: 'Tue, 05 Mar 2024 10:00:00 GMT', enclosure: { url: podcast.notFoundUrl, type: 'audio/x-m4a' } },
        { title: 'Unreachable', pubDate: 'Tue, 05 Mar 2024 09:00:00 GMT', enclosure: { url: await unreachableUrl('/ep.m4a'), type: 'audio/x-m4a' } },
        // FairPlay-protected audio (an skd:// session key yt-dlp marks has_drm): the runner's audio-only DRM path.
        { title: 'Protected', pubDate: 'Mon, 04 Mar 2024 10:00:00 GMT', enclosure: { url: pages.drmAudioUrl, type: 'application/vnd.apple.mpegurl' } },
        // Still downloading when the others are done, so the batch is seen part-way.
        { title: 'Slow', pubDate: 'Sun, 03 Mar 2024 10:00:00 GMT', enclosure: { url: media.slowUrl(30), type: 'video/mp4' } },
      ],
    }));
    show(GITOPS_SHOW, buildFeed({
      title: 'Applied with kubectl',
      image: podcast.showArtUrl,
      items: [
        { title: 'GitOps two', pubDate: 'Thu, 07 Mar 2024 08:00:00 GMT', enclosure: { url: podcast.episodeUrl('ep4.m4a'), type: 'audio/x-m4a' } },
        { title: 'GitOps one', pubDate: 'Wed, 06 Mar 2024 08:00:00 GMT', enclosure: { url: podcast.episodeUrl('ep3.m4a'), type: 'audio/x-m4a' } },
      ],
    }));
    show(TWIN_SHOW, buildFeed({
      title: 'Twins',
      items: [
        { title: 'Twin B', pubDate: 'Thu, 07 Mar 2024 08:00:00 GMT', enclosure: { url: podcast.episodeUrl('ep2.m4a'), type: 'audio/x-m4a' } },
        { title: 'Twin A', pubDate: 'Wed, 06 Mar 2024 08:00:00 GMT', enclosure: { url: podcast.episodeUrl('ep1.m4a'), type: 'audio/x-m4a' } },
      ],
    }));
    show(BIG_SHOW, feedOfSize(501, `${podcast.baseUrl}/episodes`));
    // Playlists as yt-dlp's generic extractor reads them: flat extraction reads this document only.
    platform.routes.set('/playlists/small.rss', serve(buildFeed({
      title: 'A playlist',
      items: [
        { title: 'First video', link: media.mp4Url, guid: 'v-1' },
        { title: 'Second video', enclosure: { url: podcast.episodeUrl('ep4.m4a'), type: 'audio/x-m4a' }, guid: 'v-2' },
      ],
    })));
    platform.routes.set('/playlists/big.rss', serve(feedOfSize(501, `${podcast.baseUrl}/episodes`)));
    svc = await startService({
      env: {
        PODCAST_LOOKUP_ENDPOINT: platform.lookupEndpoint,
        MEDIA_INFO_URL_MAP: JSON.stringify({
          [canonical(PL)]: `${platform.baseUrl}/playlists/small.rss`,
          [canonical(BIG_PL)]: `${platform.baseUrl}/playlists/big.rss`,
        }),
      },
    });
  });

  after(async () => {
    await svc?.stop();
    await Promise.all([platform?.stop(), podcast?.stop(), media?.stop(), pages?.stop(), receiver?.stop()]);
  });

  it('501 entries, show or playlist: 413 and nothing in Postgres or the cluster', async () => {
    const before = { jobs: await count('jobs'), batches: await count('batches'), cluster: await clusterObjects() };
    for (const url of [showUrl(BIG_SHOW), canonical(BIG_PL), `https://www.youtube.com/watch?v=dQw4w9WgXcQ&list=${BIG_PL}`]) {
      const r = await svc.api('POST', '/jobs', { url, audio_only: true });
      expect(r.status, `${url}: ${JSON.stringify(r.body)}`).to.equal(413);
      expect(r.body.error).to.be.a('string');
    }
    // Give a stray create (there must be none) the time to show up.
    await new Promise((r) => setTimeout(r, 1000));
    expect({ jobs: await count('jobs'), batches: await count('batches'), cluster: await clusterObjects() }).to.deep.equal(before);
  });

  it('a paused show: renamed, started, every episode Completed under its new name with the feed\'s metadata and artwork, one batch_completed', async () => {
    const created = await svc.api('POST', '/jobs', {
      url: showUrl(SHOW), paused: true, audio_only: true, folder: 'shows/e2e', download_thumbnail: true, webhook_url: receiver.url,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body).to.include({ total_episodes: 2, paused: true });
    const id = created.body.batch_id as string;
    const episodes = created.body.episodes as Json[];
    expect(episodes.map((e) => Object.keys(e).sort())).to.deep.equal([['job_id', 'title', 'url'], ['job_id', 'title', 'url']]);
    expect(episodes.map((e) => e.title)).to.deep.equal(EPISODES.map((e) => e.title));
    const ids = episodes.map((e) => e.job_id as string);
    expect(created.body.episode_jobs).to.deep.equal(ids);

    expect(await batch(id)).to.deep.include({
      id, kind: 'show', show_url: showUrl(SHOW), status: 'paused', folder: 'shows/e2e', total_episodes: 2,
      completed_episodes: 0, failed_episodes: 0, skipped_episodes: 0, progress: 0, episode_jobs: ids, finished_at: null,
    });
    const renamed = await svc.api('PATCH', `/batch/${id}/jobs`, { renames: ids.map((job_id, i) => ({ job_id, filename: EPISODES[i]!.rename })) });
    expect(renamed).to.deep.equal({ status: 200, body: { updated: 2, errors: [] } });
    // Nothing runs while paused: the controller has seen the MediaBatch (its status says paused), and made no episode MediaJob.
    await eventually(async () => {
      const r = await svc.cluster.kubectl(['get', 'mb', id, '-o', 'jsonpath={.status.status}']).catch(() => undefined);
      return r?.stdout.trim() === 'paused' || undefined;
    }, 15_000, 250);
    expect(await ownedMediaJobs(svc, id)).to.deep.equal([]);
    for (const j of ids) expect((await svc.api('GET', `/jobs/${j}`)).body.status).to.equal('Pending');

    const started = await svc.api('POST', `/batch/${id}/start`);
    expect(started).to.deep.equal({ status: 200, body: { batch_id: id, started_jobs: 2, status: 'processing' } });

    const done = await waitForBatch(id, ['completed', 'finished']);
    expect(done).to.deep.include({ status: 'completed', total_episodes: 2, completed_episodes: 2, failed_episodes: 0, skipped_episodes: 0, progress: 100 });
    expect(done.finished_at).to.be.a('number');
    expect((await ownedMediaJobs(svc, id)).length).to.equal(2);

    for (const [i, jobId] of ids.entries()) {
      const ep = EPISODES[i]!;
      const job = await waitForJob(jobId);
      expect(job, String(job.error)).to.include({ status: 'Completed', s3_key: `${svc.managedPrefix}/videos/shows/e2e/${ep.rename}.m4a`, title: ep.title, release_date: ep.releaseDate });
      expect(job.description ?? null, 'no description for podcast sources').to.equal(null);
      expect(job.thumbnail_key).to.equal(`${svc.managedPrefix}/videos/shows/e2e/${ep.rename}.jpg`);
      const art = await fetch(job.thumbnail_url as string);
      expect(art.status).to.equal(200);
      expect([...new Uint8Array(await art.arrayBuffer()).subarray(0, 3)], 'a JPEG').to.deep.equal([0xff, 0xd8, 0xff]);
      expect((await fetch(job.s3_url as string)).status).to.equal(200);

      const hook = await eventually(() => hooks((h) => h.job_id === jobId && h.type === 'job_completed')[0], 15_000);
      expect(hook).to.have.all.keys('type', 'job_id', 'status', 'url', 'key', 's3_url', 'folder', 'title', 'description',
        'release_date', 'subtitle_key', 'thumbnail_key', 'thumbnail_url', 'event_id');
      expect(hook).to.include({
        status: 'completed', key: job.s3_key, folder: 'shows/e2e', title: ep.title, description: null, release_date: ep.releaseDate,
        thumbnail_key: job.thumbnail_key, subtitle_key: null,
      });
    }
    // Both episodes' artwork was fetched: the episode's own, and the show's for the one without.
    expect(podcast.paths).to.include.members(['/art/episode.png', '/art/show.jpg']);

    const completed = await eventually(() => hooks((h) => h.type === 'batch_completed' && h.batch_id === id)[0], 15_000);
    expect(completed).to.have.all.keys('type', 'batch_id', 'status', 'show_url', 'folder', 'total_episodes', 'completed_episodes', 'failed_episodes', 'event_id');
    expect(completed).to.include({ status: 'completed', show_url: showUrl(SHOW), folder: 'shows/e2e', total_episodes: 2, completed_episodes: 2, failed_episodes: 0 });
    // After every episode's own event, and only once.
    const order = hooks((h) => ids.includes(h.job_id as string) || h.batch_id === id).map((h) => h.type);
    expect(order.at(-1)).to.equal('batch_completed');
    await new Promise((r) => setTimeout(r, 1500));
    expect(hooks((h) => h.type === 'batch_completed' && h.batch_id === id)).to.have.length(1);

    const row = await mbRow(svc, id);
    expect(row).to.deep.include({ STATUS: 'completed', DONE: '2/2', FAILED: '0' });
    // A done batch is no longer paused: neither renamed nor started again.
    expect(await svc.api('POST', `/batch/${id}/start`)).to.deep.equal({ status: 400, body: { error: 'Batch is not paused (current status: completed)' } });
    expect(await svc.api('PATCH', `/batch/${id}/jobs`, { renames: [{ job_id: ids[0], filename: 'again' }] }))
      .to.deep.equal({ status: 400, body: { error: 'Batch is not paused. Only paused batches can be renamed.' } });
  });

  it('two episodes renamed alike are both delivered, under distinct keys', async () => {
    const created = await svc.api('POST', '/jobs', { url: showUrl(TWIN_SHOW), paused: true, audio_only: true, folder: 'twins' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.batch_id as string;
    const ids = created.body.episode_jobs as string[];
    expect((await svc.api('PATCH', `/batch/${id}/jobs`, { renames: ids.map((job_id) => ({ job_id, filename: 'same name' })) })).body).to.deep.equal({ updated: 2, errors: [] });
    expect((await svc.api('POST', `/batch/${id}/start`)).status).to.equal(200);
    expect(await waitForBatch(id, ['completed', 'finished'])).to.include({ status: 'completed' });
    const keys = (await Promise.all(ids.map(waitForJob))).map((j) => j.s3_key as string);
    expect(new Set(keys).size, keys.join(', ')).to.equal(2);
    const taken = `${svc.managedPrefix}/videos/twins/same name`;
    expect(keys).to.include(`${taken}.m4a`);
    const other = keys.find((k) => k !== `${taken}.m4a`)!;
    const second = ids[keys.indexOf(other)]!;
    expect(other).to.equal(`${taken}-${second.slice(0, 8)}.m4a`);
  });

  // Slow (about 45 s): five episodes through real runners, one of them served at a 30 s pace so that the
  // batch is seen part-way; the test then waits for it to end.
  it('a show with a missing, an unreachable and a DRM-protected episode: part-way progress, then finished with the skipped one counted under failed', async () => {
    const created = await svc.api('POST', '/jobs', { url: showUrl(MIXED_SHOW), audio_only: true, webhook_url: receiver.url });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body).to.include({ total_episodes: 5, paused: false });
    const id = created.body.batch_id as string;
    const [fine, gone, unreachable, protectedEp, slow] = created.body.episode_jobs as string[];
    // Not paused: each entry also carries the feed's description and release date.
    expect((created.body.episodes as Json[])[0]).to.deep.equal({
      job_id: fine, url: podcast.episodeUrl('ep3.m4a'), title: 'Fine', description: null, release_date: '2024-03-06T10:00:00.000Z',
    });
    const partWay = await eventually(async () => {
      const b = await batch(id);
      return (b.completed_episodes as number) + (b.failed_episodes as number) >= 4 ? b : undefined;
    }, 60_000, 100);
    expect(partWay, 'four of five done, the slow one still running').to.deep.include({
      status: 'processing', completed_episodes: 1, failed_episodes: 3, skipped_episodes: 1, progress: 80, finished_at: null,
    });
    expect(hooks((h) => h.type === 'batch_completed' && h.batch_id === id)).to.deep.equal([]);
    const done = await waitForBatch(id, ['completed', 'finished']);
    expect(done).to.deep.include({ status: 'finished', total_episodes: 5, completed_episodes: 2, failed_episodes: 3, skipped_episodes: 1, progress: 100 });
    expect(await waitForJob(slow!)).to.include({ status: 'Completed' });
    expect(await waitForJob(fine!)).to.include({ status: 'Completed' });
    expect(await waitForJob(gone!)).to.include({ status: 'Warning', error_type: 'warning' });
    expect(await waitForJob(unreachable!)).to.include({ status: 'Failed', error_type: 'error' });
    expect(await waitForJob(protectedEp!)).to.include({ status: 'Skipped', reason: 'drm_audio_only' });

    const completed = await eventually(() => hooks((h) => h.type === 'batch_completed' && h.batch_id === id)[0], 15_000);
    expect(completed).to.include({ status: 'finished', total_episodes: 5, completed_episodes: 2, failed_episodes: 3 });
    expect(hooks((h) => h.job_id === protectedEp).map((h) => h.type)).to.include('job_skipped');
    expect(hooks((h) => h.job_id === unreachable).map((h) => h.type)).to.include('job_failed');
    expect(hooks((h) => h.job_id === gone).map((h) => h.type), 'no job_failed for a content warning').to.not.include('job_failed');
    await new Promise((r) => setTimeout(r, 1000));
    expect(hooks((h) => h.type === 'batch_completed' && h.batch_id === id)).to.have.length(1);
    expect(await mbRow(svc, id)).to.deep.include({ STATUS: 'finished', DONE: '5/5', FAILED: '3' });
  });

  it('a genuine playlist becomes a batch whose videos all complete', async () => {
    const created = await svc.api('POST', '/jobs', { url: `https://www.youtube.com/watch?v=dQw4w9WgXcQ&list=${PL}` });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(Object.keys(created.body)).to.deep.equal(['batch_id', 'total_videos', 'job_ids']);
    expect(created.body.total_videos).to.equal(2);
    const id = created.body.batch_id as string;
    const ids = created.body.job_ids as string[];
    const done = await waitForBatch(id, ['completed', 'finished']);
    expect(done).to.deep.include({ kind: 'playlist', status: 'completed', total_episodes: 2, completed_episodes: 2, progress: 100, episode_jobs: ids });
    const jobs = await Promise.all(ids.map(waitForJob));
    expect(jobs.map((j) => [j.status, j.url])).to.deep.equal([['Completed', media.mp4Url], ['Completed', podcast.episodeUrl('ep4.m4a')]]);
    // A mix (RD…), WL or LL list is a single-video request: api-gateway/test/batches-api.test.ts checks that
    // without running the job, since a runner would try the platform itself and leave loopback.
  });

  it('a MediaBatch applied with kubectl is expanded from its show, runs, and is its owner\'s in GET /batch/{id} and GET /jobs', async () => {
    const manifest = svc.cluster.manifest('gitops-batch.yaml', [
      'apiVersion: mediajobs.io/v1alpha1', 'kind: MediaBatch', 'metadata:', '  name: gitops-show', 'spec:',
      `  showUrl: ${showUrl(GITOPS_SHOW)}`, '  owner:', `    apiKeyId: ${svc.apiKeyId}`, '  folder: gitops',
      '  options:', '    audioOnly: true', '',
    ].join('\n'));
    await svc.cluster.kubectl(['apply', '-f', manifest]);
    const uid = (await svc.cluster.kubectl(['get', 'mb', 'gitops-show', '-o', 'jsonpath={.metadata.uid}'])).stdout.trim();
    const done = await eventually(async () => {
      const r = await svc.api('GET', `/batch/${uid}`);
      return r.status === 200 && ['completed', 'finished'].includes(r.body.status as string) ? r.body : undefined;
    }, 120_000, 300);
    expect(done).to.deep.include({ id: uid, kind: 'show', status: 'completed', folder: 'gitops', total_episodes: 2, completed_episodes: 2, failed_episodes: 0 });
    const listed = (await svc.api('GET', '/jobs?limit=100')).body.jobs as Json[];
    for (const jobId of done.episode_jobs as string[]) {
      expect(listed.find((j) => j.id === jobId), jobId).to.include({ status: 'Completed' });
    }
    const titles = await Promise.all((done.episode_jobs as string[]).map(async (j) => (await svc.api('GET', `/jobs/${j}`)).body.title));
    expect(titles.sort()).to.deep.equal(['GitOps one', 'GitOps two']);
    expect(await mbRow(svc, 'gitops-show')).to.deep.include({ STATUS: 'completed', DONE: '2/2', FAILED: '0' });
    const described = (await svc.cluster.kubectl(['describe', 'mb', 'gitops-show'])).stdout;
    expect(described).to.match(/Done:\s+2\/2\n/).and.match(/Message:\s+All 2 episodes completed\n/).and.match(/Reason:\s+Recorded\n/);
  });

  it('kubectl get mb shows Status, Done, Failed and Age', async () => {
    const out = (await svc.cluster.kubectl(['get', 'mb'])).stdout.trim().split('\n');
    expect(out[0]!.split(/\s{2,}/)).to.deep.equal(['NAME', 'STATUS', 'DONE', 'FAILED', 'AGE']);
    const wide = (await svc.cluster.kubectl(['get', 'mb', '-o', 'wide'])).stdout.trim().split('\n');
    expect(wide[0]!.split(/\s{2,}/)).to.deep.equal(['NAME', 'STATUS', 'DONE', 'FAILED', 'AGE', 'URL']);
  });

  it('POST /jobs/bulk with three URLs: every job Completed', async () => {
    const urls = [media.mp4Url, podcast.episodeUrl('ep1.m4a'), podcast.episodeUrl('ep2.m4a')];
    const r = await svc.api('POST', '/jobs/bulk', { urls, folder: 'bulk' });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.count).to.equal(3);
    const jobs = await Promise.all((r.body.job_ids as string[]).map(waitForJob));
    expect(jobs.map((j) => [j.status, j.url, j.error]), JSON.stringify(jobs)).to.deep.equal(urls.map((u) => ['Completed', u, null]));
    for (const j of jobs) expect(j.s3_key).to.match(new RegExp(`^${svc.managedPrefix}/videos/bulk/[^/]+$`));
  });
});

/** The names of the MediaJobs a MediaBatch owns. */
async function ownedMediaJobs(svc: Service, batchName: string): Promise<string[]> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(svc.cluster.cluster.kubeconfigPath);
  const list = await kc.makeApiClient(k8s.CustomObjectsApi).listNamespacedCustomObject({
    group: 'mediajobs.io', version: 'v1alpha1', namespace: 'default', plural: 'mediajobs',
  }) as { items: { metadata: k8s.V1ObjectMeta }[] };
  return list.items.filter((mj) => mj.metadata.ownerReferences?.some((o) => o.kind === 'MediaBatch' && o.name === batchName)).map((mj) => mj.metadata.name!);
}

/** A MediaBatch's row of `kubectl get mb`, by column. */
async function mbRow(svc: Service, name: string): Promise<Record<string, string>> {
  return eventually(async () => {
    const [header, ...rows] = (await svc.cluster.kubectl(['get', 'mb'])).stdout.trim().split('\n');
    const cols = header!.split(/\s{2,}/);
    const row = rows.map((r) => r.split(/\s{2,}/)).find((r) => r[0] === name);
    // The status mirror follows the row: wait for the terminal one.
    if (!row || !['completed', 'finished'].includes(row[1]!)) return undefined;
    return Object.fromEntries(cols.map((c, i) => [c, row[i] ?? '']));
  }, 15_000, 250);
}
