// Subtitles, thumbnails, progress webhooks, live recording and DRM through
// every component: POST /jobs (or kubectl) → operator → runner pod (real
// yt-dlp and ffmpeg) → managed storage → GET /jobs/{id}, the MediaJob and the
// webhooks. The media is made by ffmpeg and served on loopback: an HTML5 page
// with a WebVTT <track>, HLS with a subtitle rendition, FairPlay-marked HLS,
// and live HLS streams produced in real time.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { eventually } from '../../local-cluster/test/support.js';
import { startLiveStream, type LiveStream } from '../support/media-live.js';
import { CUES, PAGES, parseVtt, startPagesServer, type PagesServer } from '../support/media-pages.js';
import { startReceiver, startService, type Receiver, type Service } from './support.js';

const run = promisify(execFile);

interface Probe {
  format: { format_name: string; duration: string };
  streams: { codec_type: string; codec_name: string; width?: number; height?: number }[];
}

/** Download a URL to a scratch file and hand it to `use` (ffprobe, a decoder). */
async function withDownload<T>(url: string, use: (file: string, bytes: Buffer) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'mj-extras-dl-'));
  try {
    const res = await fetch(url);
    expect(res.status, 'download status').to.equal(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    const file = join(dir, 'file');
    writeFileSync(file, bytes);
    return await use(file, bytes);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function ffprobe(file: string): Promise<Probe> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
  return JSON.parse(stdout) as Probe;
}

/** Decode every frame; a recording that is not playable to its end fails here. */
async function decodesCleanly(file: string): Promise<void> {
  const { stderr } = await run('ffmpeg', ['-v', 'error', '-nostdin', '-i', file, '-f', 'null', '-']);
  expect(stderr.trim(), 'decoder errors').to.equal('');
}

const TERMINAL = ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin'];

describe('end to end: subtitles, thumbnails, progress, live streams, DRM', function () {
  this.timeout(240_000);
  let svc: Service;
  let pages: PagesServer;
  let receiver: Receiver;

  before(async () => {
    [pages, receiver] = await Promise.all([startPagesServer(), startReceiver()]);
    // Poll a scheduled stream every second instead of every 15 (tests only).
    svc = await startService({ operatorEnv: { RUNNER_ENV: JSON.stringify({ RUNNER_WAIT_FOR_VIDEO_POLL_SECONDS: '1' }) } });
  });

  after(async () => {
    await svc?.stop();
    await receiver?.stop();
    await pages?.stop();
  });

  async function submit(body: Record<string, unknown>): Promise<string> {
    const r = await svc.api('POST', '/jobs', body);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.job_id as string;
  }

  async function finished(id: string, timeoutMs = 90_000): Promise<Record<string, unknown>> {
    return eventually(async () => {
      const r = await svc.api('GET', `/jobs/${id}`);
      return TERMINAL.includes(r.body.status as string) ? r.body : undefined;
    }, timeoutMs, 200);
  }

  const hooksOf = (id: string) => receiver.hooks.filter((h) => h.body.job_id === id).map((h) => h.body);

  async function mediaJobStatus(name: string): Promise<{ step?: string; progress?: number; status?: string }> {
    const r = await svc.cluster.kubectl(['get', 'mediajob', name, '-o', 'jsonpath={.status}'], { allowFail: true });
    return r.code === 0 && r.stdout ? (JSON.parse(r.stdout) as { step?: string; progress?: number }) : {};
  }

  describe('subtitles and thumbnails', () => {
    it('delivers the HTML5 <track> as WebVTT beside the video; download_thumbnail is ignored for an ordinary page', async () => {
      const id = await submit({ url: pages.trackPageUrl, download_subtitles: true, download_thumbnail: true, webhook_url: receiver.url });
      const job = await finished(id);
      expect(job.status, String(job.error)).to.equal('Completed');
      expect(job.subtitle_key).to.equal((job.s3_key as string).replace(/\.mp4$/, '.en.vtt'));
      await withDownload(job.subtitle_url as string, async (file, bytes) => {
        expect((await ffprobe(file)).format.format_name).to.equal('webvtt');
        expect(parseVtt(bytes.toString('utf8'))).to.deep.equal(CUES.map((c) => ({ ...c })));
      });
      // rule 6: no thumbnail key or URL anywhere
      expect(job).to.not.have.any.keys('thumbnail_key', 'thumbnail_url');

      const done = await eventually(() => hooksOf(id).find((h) => h.type === 'job_completed'), 15_000);
      expect(done).to.include({ subtitle_key: job.subtitle_key, thumbnail_key: null });
      expect(done.subtitle_url).to.be.a('string');
      expect(done).to.not.have.property('thumbnail_url');
      // without enable_progress_webhook: no progress events
      expect(hooksOf(id).map((h) => h.type)).to.deep.equal(['job_processing', 'job_completed']);
    });

    it('delivers an HLS subtitle rendition', async () => {
      const job = await finished(await submit({ url: pages.hlsSubtitlesUrl, download_subtitles: true }));
      expect(job.status, String(job.error)).to.equal('Completed');
      expect(job.subtitle_key).to.match(/\.en\.vtt$/);
      await withDownload(job.subtitle_url as string, async (_file, bytes) => {
        expect(parseVtt(bytes.toString('utf8')).map((c) => c.text)).to.deep.equal(CUES.map((c) => c.text));
      });
    });

    it('a source without subtitles completes without a subtitle key', async () => {
      const job = await finished(await submit({ url: pages.plainPageUrl, download_subtitles: true }));
      expect(job.status, String(job.error)).to.equal('Completed');
      expect(job).to.not.have.any.keys('subtitle_key', 'subtitle_url');
    });

    it('delivers a thumbnail for a show episode (spec.showEpisode, set by the batch controller)', async () => {
      const keyId = (await svc.db.pool.query<{ id: string }>('SELECT id FROM api_keys WHERE name = $1', ['e2e'])).rows[0]!.id;
      const manifest = svc.cluster.manifest('episode.yaml', [
        'apiVersion: mediajobs.io/v1alpha1', 'kind: MediaJob', 'metadata:', '  name: show-episode-1', 'spec:',
        `  url: ${pages.trackPageUrl}`, '  owner:', `    apiKeyId: ${keyId}`, '  downloadThumbnail: true', '  showEpisode: true', '',
      ].join('\n'));
      await svc.cluster.kubectl(['apply', '-f', manifest]);
      const uid = await eventually(async () => (await svc.cluster.kubectl(['get', 'mediajob', 'show-episode-1', '-o', 'jsonpath={.metadata.uid}'])).stdout.trim());
      const job = await finished(uid);
      expect(job.status, String(job.error)).to.equal('Completed');
      expect(job.thumbnail_key).to.equal((job.s3_key as string).replace(/\.mp4$/, '.jpg'));
      await withDownload(job.thumbnail_url as string, async (file) => {
        expect((await ffprobe(file)).streams[0]).to.include({ codec_name: 'mjpeg', width: PAGES.posterWidth, height: PAGES.posterHeight });
      });
    });
  });

  describe('progress webhooks', () => {
    it('sends each stage once, in order, between job_processing and job_completed, and never again after a restart', async () => {
      const id = await submit({ url: pages.trackPageUrl, enable_progress_webhook: true, webhook_url: receiver.url });
      const job = await finished(id);
      expect(job).to.include({ status: 'Completed', step: 'Finished', progress: 100 });
      const all = await eventually(() => {
        const h = hooksOf(id);
        return h.some((x) => x.type === 'job_completed') ? h : undefined;
      }, 15_000);
      expect(all.map((h) => (h.type === 'progress' ? `${h.stage as string}:${h.progress_percent as number}` : h.type))).to.deep.equal([
        'job_processing', 'downloading:0', 'download_complete:33', 'muxing:33', 'mux_complete:66', 'uploading:66', 'job_completed',
      ]);
      // The contract's fields, and the download's figures where the runner knew them (issue 38 item 6), nothing else.
      const contract = ['type', 'job_id', 'url', 'stage', 'progress_percent', 'event_id'];
      const figures = ['downloaded_bytes', 'total_bytes', 'speed_bps', 'eta_seconds'];
      for (const p of all.filter((h) => h.type === 'progress')) {
        expect(p).to.include.all.keys(...contract);
        expect(Object.keys(p).filter((k) => !contract.includes(k)), `${String(p.stage)}: fields beside the contract's`).to.satisfy((ks: string[]) => ks.every((k) => figures.includes(k)));
        expect(p).to.include({ job_id: id, url: pages.trackPageUrl });
      }
      expect(new Set(all.map((h) => h.event_id)).size).to.equal(all.length);

      await svc.restartOperator();
      await new Promise((r) => setTimeout(r, 3000));
      expect(hooksOf(id)).to.have.length(all.length);
      const rows = await svc.db.pool.query(`SELECT 1 FROM outbox WHERE job_id = $1 AND type = 'progress'`, [id]);
      expect(rows.rowCount).to.equal(5);
    });
  });

  describe('live streams', () => {
    let stream: LiveStream | undefined;
    afterEach(async () => {
      await stream?.stop();
      stream = undefined;
    });

    it('detects a live HLS stream, records it up to max_duration as a playable file, showing its step on the job and the MediaJob', async () => {
      stream = await startLiveStream({ segmentSeconds: 1, listSize: 6 });
      await stream.ready;
      await new Promise((r) => setTimeout(r, 3000));
      const id = await submit({ url: stream.url, max_duration: 5 });
      // While it records: Downloading on GET /jobs/{id} and on the MediaJob.
      const live = await eventually(async () => {
        const r = await svc.api('GET', `/jobs/${id}`);
        return r.body.status === 'Processing' && r.body.step === 'Downloading' && stream!.segmentRequests.length > 0 ? r.body : undefined;
      }, 60_000, 100);
      expect(live.progress).to.be.a('number').within(0, 33);
      expect((await mediaJobStatus(id)).step).to.be.oneOf(['Downloading', 'Muxing', 'Uploading', 'Finished']);

      const job = await finished(id);
      expect(job.status, String(job.error)).to.equal('Completed');
      expect(stream.segmentRequests[0], 'recorded from the live point').to.not.equal('s00000.ts');
      await withDownload(job.s3_url as string, async (file) => {
        const p = await ffprobe(file);
        expect(p.format.format_name).to.include('mp4');
        expect(p.streams.map((s) => s.codec_type).sort()).to.deep.equal(['audio', 'video']);
        expect(Number(p.format.duration)).to.be.closeTo(5, 0.5);
        await decodesCleanly(file);
      });
    });

    it('live_from_start records from the first segment the playlist lists', async () => {
      stream = await startLiveStream({ segmentSeconds: 1, listSize: 0 });
      await stream.ready;
      await new Promise((r) => setTimeout(r, 5000));
      const job = await finished(await submit({ url: stream.url, live_from_start: true, max_duration: 3 }));
      expect(job.status, String(job.error)).to.equal('Completed');
      expect(stream.segmentRequests[0]).to.equal('s00000.ts');
      await withDownload(job.s3_url as string, async (file) => {
        expect(Number((await ffprobe(file)).format.duration)).to.be.closeTo(3, 0.5);
      });
    });

    it('wait_for_video waits for a scheduled stream to start, then records it', async () => {
      stream = await startLiveStream({ segmentSeconds: 1, listSize: 6, startDelayMs: 8000 });
      const id = await submit({ url: stream.url, wait_for_video: true, max_duration: 3 });
      const job = await finished(id);
      expect(job.status, String(job.error)).to.equal('Completed');
      await withDownload(job.s3_url as string, async (file) => {
        expect(Number((await ffprobe(file)).format.duration)).to.be.closeTo(3, 0.5);
      });
    });

    it('without wait_for_video a stream that has not started is a content warning', async () => {
      stream = await startLiveStream({ segmentSeconds: 1, startDelayMs: 120_000 });
      const job = await finished(await submit({ url: stream.url }));
      expect(job).to.include({ status: 'Warning', error_type: 'warning' });
    });

    it('cancelled by deleting its MediaJob, a recording stops and nothing is delivered or left behind', async () => {
      stream = await startLiveStream({ segmentSeconds: 1, listSize: 6 });
      await stream.ready;
      const id = await submit({ url: stream.url, max_duration: 600, webhook_url: receiver.url });
      await eventually(async () => {
        const s = await mediaJobStatus(id);
        return s.step === 'Downloading' && stream!.segmentRequests.length >= 2;
      }, 60_000, 100);
      await svc.cluster.kubectl(['delete', 'mediajob', id]);
      // The Job is garbage-collected with its MediaJob, the pod stopped: no recorder fetches segments any more.
      await eventually(async () => {
        const r = await svc.cluster.kubectl(['get', 'jobs', '-l', `mediajobs.io/mediajob=${id}`, '-o', 'name']);
        return r.stdout.trim() === '';
      }, 30_000, 200);
      await new Promise((r) => setTimeout(r, 2000));
      const settled = stream.segmentRequests.length;
      await new Promise((r) => setTimeout(r, 4000));
      expect(stream.segmentRequests.length, 'segments fetched after the cancellation').to.equal(settled);
      // Nothing in storage names the job: no delivered file, no orphan.
      const stored = readdirSync(svc.env.MANAGED_STORAGE_DIR!, { recursive: true }).map(String);
      expect(stored.filter((f) => f.includes(id))).to.deep.equal([]);
      const row = await svc.api('GET', `/jobs/${id}`);
      expect(row.body.s3_key).to.equal(null);
      expect(hooksOf(id).map((h) => h.type)).to.not.include('job_completed');
    });
  });

  describe('DRM', () => {
    it('an audio-only DRM-protected item ends Skipped with a job_skipped webhook and a reason', async () => {
      const id = await submit({ url: pages.drmAudioUrl, webhook_url: receiver.url });
      const job = await finished(id);
      expect(job).to.include({ status: 'Skipped', reason: 'drm_audio_only', s3_key: null });
      const skipped = await eventually(() => hooksOf(id).find((h) => h.type === 'job_skipped'), 15_000);
      expect(skipped).to.have.all.keys('type', 'job_id', 'status', 'url', 'reason', 'event_id');
      expect(skipped).to.include({ status: 'skipped', url: pages.drmAudioUrl, reason: 'drm_audio_only' });
      expect(hooksOf(id).map((h) => h.type)).to.not.include('job_failed');
    });

    it('DRM-protected video is a content warning, without job_failed, also when only its audio was asked for', async () => {
      const id = await submit({ url: pages.drmVideoUrl, webhook_url: receiver.url });
      // Skipped is for items that have no video; asking for audio does not make a video one.
      const audio = await submit({ url: pages.drmVideoUrl, audio_only: true });
      const job = await finished(id);
      expect(job).to.include({ status: 'Warning', error_type: 'warning', error: 'Media is DRM-protected' });
      expect(await finished(audio)).to.include({ status: 'Warning', error_type: 'warning', error: 'Media is DRM-protected' });
      // One terminal event, job_warning (ADR 0029), never job_failed.
      await new Promise((r) => setTimeout(r, 1500));
      expect(hooksOf(id).map((h) => h.type)).to.deep.equal(['job_processing', 'job_warning']);
    });
  });
});
