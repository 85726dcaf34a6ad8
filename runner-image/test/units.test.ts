// The runner's pure parts: metadata mapping, progress parsing, status
// reporting order and the termination message bound (format, codec and clip
// decisions: plan.test.ts).
import { expect } from 'chai';
import { pino } from 'pino';
import { InvalidSpec, parseSpec, SpecError } from '../src/config.js';
import { parseJobRequest } from '@mediajobs/lib/job-options';
import { redactUrls } from '@mediajobs/lib/logger';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { NETWORK_PROTOCOLS } from '../src/ffmpeg.js';
import { actualQuality, releaseDateOf } from '../src/plan.js';
import { readsDirectly, sourceInputArgs, transportIsDefault } from '../src/source-read.js';
import { MAX_TERMINATION_MESSAGE_BYTES, StatusReporter, terminationMessage, type RunnerStatusPatch } from '../src/report.js';
import { DownloadProgress, parseProgressLine } from '../src/ytdlp.js';
import { JobSteps } from '../src/steps.js';

const silent = pino({ level: 'silent' });

describe('runner: planning and reporting', () => {
  describe('which sources ffmpeg reads straight from their URLs (ADR 0007)', () => {
    const file = { format_id: '18', url: 'https://cdn.example/v.mp4', protocol: 'https', http_headers: { 'User-Agent': 'UA/1', Referer: 'https://site.example/' } };

    it('a plain HTTP(S) file; not HLS, DASH, chunked (downloader_options) or separately-cookied formats', () => {
      expect(readsDirectly(file)).to.equal(true);
      expect(readsDirectly({ ...file, protocol: 'http' })).to.equal(true);
      expect(readsDirectly({ ...file, protocol: 'm3u8_native' })).to.equal(false);
      expect(readsDirectly({ ...file, protocol: 'http_dash_segments' })).to.equal(false);
      expect(readsDirectly({ ...file, fragments: [{ url: 'a' }] })).to.equal(false);
      expect(readsDirectly({ ...file, downloader_options: { http_chunk_size: 10485760 } })).to.equal(false);
      expect(readsDirectly({ ...file, cookies: 'a=b; Domain=.cdn.example' })).to.equal(false);
      const { url: _url, ...noUrl } = file;
      expect(readsDirectly(noUrl)).to.equal(false);
    });

    it('only when YTDLP_ARGS leaves the transport alone (the image\'s --js-runtimes node does)', () => {
      expect(transportIsDefault([])).to.equal(true);
      expect(transportIsDefault(['--js-runtimes', 'node'])).to.equal(true);
      for (const args of [['--proxy', 'socks5://p:1080'], ['--proxy=http://p'], ['-4'], ['--source-address', '10.0.0.1'], ['--no-check-certificates'], ['--client-certificate-key', 'k.pem']]) {
        expect(transportIsDefault(args), args.join(' ')).to.equal(false);
      }
    });

    it('sends the format\'s headers, checks certificates on HTTPS, and allows no protocol but HTTP(S)', () => {
      const args = sourceInputArgs(file, 20);
      const at = (k: string) => args[args.indexOf(k) + 1];
      expect(at('-headers')).to.equal('User-Agent: UA/1\r\nReferer: https://site.example/\r\n');
      expect(at('-rw_timeout')).to.equal('20000000');
      expect(args.filter((a) => a === '-protocol_whitelist')).to.have.length(1);
      expect(at('-protocol_whitelist')).to.equal(NETWORK_PROTOCOLS);
      expect(at('-tls_verify')).to.equal('1');
      expect(sourceInputArgs({ ...file, protocol: 'http' }, 20)).to.not.include('-tls_verify');
    });
  });

  describe('metadata', () => {
    it('actual quality is the shorter side, for horizontal and vertical video', () => {
      expect(actualQuality(1280, 720)).to.equal('720p');
      expect(actualQuality(1080, 1920)).to.equal('1080p');
      expect(actualQuality(undefined, 720)).to.equal(undefined);
    });

    it('release date is the upload date at midnight UTC', () => {
      expect(releaseDateOf({ upload_date: '20240315' })).to.equal('2024-03-15T00:00:00.000Z');
      expect(releaseDateOf({ upload_date: '20240230' })).to.equal(undefined);
      expect(releaseDateOf({ timestamp: Date.UTC(2023, 0, 2, 23, 59) / 1000 })).to.equal('2023-01-02T00:00:00.000Z');
      expect(releaseDateOf({})).to.equal(undefined);
    });

    it('strips query strings from URLs before anything is logged', () => {
      expect(redactUrls('GET https://cdn.example.com/v.mp4?sig=secret&exp=1 failed')).to.equal('GET https://cdn.example.com/v.mp4?… failed');
    });
  });

  describe('spec', () => {
    it('accepts a normalised spec and fills what a manifest may leave out', () => {
      const s = parseSpec(JSON.stringify({ url: 'https://example.com/v', owner: { apiKeyId: 'k' }, destination: { type: 'managed' } }));
      expect(s).to.include({ videoCodec: 'copy', audioOnly: false, videoQuality: 23 });
    });

    it('refuses non-http sources and names the field, not the value', () => {
      expect(() => parseSpec(JSON.stringify({ url: 'file:///etc/passwd' }))).to.throw(InvalidSpec, 'spec.url: must be an http or https URL');
      expect(() => parseSpec(JSON.stringify({ url: 'https:' }))).to.throw(InvalidSpec, 'spec.url: is not valid');
      expect(() => parseSpec('{')).to.throw(SpecError, /not valid JSON/).and.not.to.be.instanceOf(InvalidSpec);
      try {
        parseSpec(JSON.stringify({ url: 'https://example.com/v', format: 'avi-secret' }));
      } catch (err) {
        expect((err as Error).message).to.contain('format').and.not.contain('avi-secret');
      }
    });

    it('hands on the spec the gateway wrote as it is: defaults, a preset\'s CRF, copy-with-fallback audio at the default bitrate', () => {
      for (const body of [{}, { quality_preset: 'low', video_quality: 10, video_codec: 'h264' }, { audio_only: true }, { format: 'webm', audio_bitrate: '64k' }]) {
        const request = parseJobRequest({ url: 'https://example.com/v', ...body });
        if (!request.ok) throw new Error(request.error);
        const { spec } = buildMediaJob({ jobId: 'j', apiKeyId: 'k', namespace: 'n', options: request.request.options });
        expect(parseSpec(JSON.stringify(spec)), JSON.stringify(body)).to.deep.equal(spec);
      }
    });

    it('normalises what a hand-written spec leaves out as the gateway would (format by audioOnly, bitrate, preset)', () => {
      const s = parseSpec(JSON.stringify({ url: 'https://example.com/v', audioOnly: true, qualityPreset: 'high', videoQuality: 40 }));
      expect(s).to.include({ format: 'm4a', audioBitrate: '192k', videoQuality: 20, maxResolution: 'best' });
      expect(s).not.to.have.property('audioCodec');
    });

    it('checks every option it acts on against the CRD\'s types and bounds, naming the fields', () => {
      expect(() => parseSpec(JSON.stringify({ url: 'https://example.com/v', maxDuration: 0, downloadSubtitles: 'yes', clipStart: 5 })))
        .to.throw(InvalidSpec, 'spec.downloadSubtitles: must be a boolean (true or false); spec.clipStart: must be a string; spec.maxDuration: must be at least 1');
      expect(() => parseSpec(JSON.stringify({ url: 'https://example.com/v', videoCodec: 'av1' }))).to.throw(InvalidSpec, 'spec.videoCodec: must be one of copy, h264, h265, vp9');
    });

    it('never drops a clip: one that ends before it starts, or a time it cannot read, is an invalid spec', () => {
      const clip = (c: object) => () => parseSpec(JSON.stringify({ url: 'https://example.com/v', ...c }));
      expect(clip({ clipStart: '00:04', clipEnd: '00:02' })).to.throw(InvalidSpec, 'spec.clipEnd: must be greater than clipStart');
      expect(clip({ clipEnd: '0' })).to.throw(InvalidSpec, 'spec.clipEnd: must be greater than 0');
      expect(clip({ clipStart: '1:75' })).to.throw(InvalidSpec, 'spec.clipStart: must be a time as HH:MM:SS, MM:SS or seconds, with minutes and seconds below 60');
      expect(clip({ clipStart: 'soon' })).to.throw(InvalidSpec, /^spec\.clipStart: must be a time as HH:MM:SS, MM:SS or seconds/);
      expect(parseSpec(JSON.stringify({ url: 'https://example.com/v', clipStart: '00:02', clipEnd: '00:04' }))).to.include({ clipStart: '00:02', clipEnd: '00:04' });
    });
  });

  describe('download progress', () => {
    it('parses the progress template and weighs files by expected size', () => {
      const p = parseProgressLine('MJPROGRESS downloading 500 1000 NA NA NA 1755')!;
      expect(p).to.deep.include({ status: 'downloading', downloaded: 500, total: 1000, formatId: '1755' });
      expect(parseProgressLine('[download] 50%')).to.equal(undefined);
      const info = { requested_formats: [{ format_id: 'v', filesize: 900 }, { format_id: 'a', filesize: 100 }] };
      const dp = new DownloadProgress(info, ['v', 'a']);
      expect(dp.update(p && { ...p, formatId: 'v' })).to.be.closeTo(0.45, 1e-9);
      expect(dp.update({ status: 'finished', formatId: 'v' })).to.be.closeTo(0.9, 1e-9);
      expect(dp.update({ status: 'downloading', fragment: 3, fragments: 5, formatId: 'a' })).to.be.closeTo(0.94, 1e-9);
      expect(dp.update({ status: 'finished', formatId: 'a' })).to.equal(1);
    });

    it('counts the bytes read of every format, with their total once each one\'s size is known', () => {
      const dp = new DownloadProgress({ requested_formats: [{ format_id: 'v' }, { format_id: 'a', filesize: 100 }] }, ['v', 'a']);
      expect(dp.bytes(), 'before yt-dlp said a count').to.equal(undefined);
      dp.update({ status: 'downloading', downloaded: 300, estimate: 1200, formatId: 'v' });
      expect(dp.bytes()).to.deep.equal({ downloaded: 300, total: 1300 });
      dp.update({ status: 'finished', downloaded: 1000, formatId: 'v' });
      expect(dp.bytes(), 'a finished file is as large as what was read').to.deep.equal({ downloaded: 1000, total: 1100 });
      dp.update({ status: 'downloading', downloaded: 40, formatId: 'a' });
      expect(dp.bytes()).to.deep.equal({ downloaded: 1040, total: 1100 });
      const unknown = new DownloadProgress({}, ['v']);
      unknown.update({ status: 'downloading', downloaded: 5, formatId: 'v' });
      expect(unknown.bytes()).to.deep.equal({ downloaded: 5 });
    });

    it('weighs equally when sizes are unknown, and never lets an estimate reach 100%', () => {
      const dp = new DownloadProgress({}, ['v', 'a']);
      expect(dp.update({ status: 'downloading', downloaded: 2000, estimate: 1000, formatId: 'v' })).to.be.closeTo(0.495, 1e-9);
    });
  });

  describe('status reporter', () => {
    it('sends patches in order, throttles progress, and survives a sink that keeps failing', async () => {
      const sent: RunnerStatusPatch[] = [];
      let fail = 0;
      const r = new StatusReporter({
        namespace: 'ns', name: 'mj', logger: silent, backoffMs: 1, progressIntervalMs: 50,
        sink: { async patch(s) { if (fail > 0) { fail--; throw Object.assign(new Error('conflict'), { code: 409 }); } sent.push(s); } },
      });
      fail = 2; // two conflicts, then success: retried
      await r.setStep('Downloading', 0, { error: null });
      r.setProgress(5);
      r.setProgress(10); // within the interval: coalesced
      r.setProgress(8); // never backwards
      await new Promise((res) => setTimeout(res, 80));
      await r.setStep('Muxing', 33);
      fail = 100; // every attempt fails: the job goes on
      await r.finish({ step: 'Finished', progress: 100, outcome: 'completed', result: { storageKey: 'k', fileSize: 1 } });
      expect(r.failures).to.equal(1);
      expect(sent.map((s) => `${s.step}:${s.progress}`)).to.deep.equal(['Downloading:0', 'Downloading:5', 'Downloading:10', 'Muxing:33']);
      expect(sent[0]).to.have.property('error', null);
    });

    it('a long download: figures alone go out at most once per figures interval, a percent step carries the latest ones', async () => {
      // yt-dlp prints a progress line about every 100 ms and each one changes
      // the bytes; every patch is an API write, a Postgres UPDATE and a watch
      // event (issue 39), so the figures alone must not make one per progress interval.
      const sent: RunnerStatusPatch[] = [];
      const r = new StatusReporter({
        namespace: 'ns', name: 'mj', logger: silent, progressIntervalMs: 20, figuresIntervalMs: 300, sink: { async patch(s) { sent.push(s); } },
      });
      const steps = new JobSteps(r, silent);
      steps.enter('Downloading');
      const read = steps.withinStep('Downloading');
      const total = 100_000_000;
      const started = Date.now();
      const seconds = 1.5;
      let lines = 0;
      // 1.5 s of progress lines every 5 ms, the percent crossing about two steps of the stage table.
      for (let t = 0; Date.now() - started < seconds * 1000; t++, lines++) {
        read(0.005 + t / 5000, { downloaded: 500_000 + t * 10_000, total });
        await new Promise((res) => setTimeout(res, 5));
      }
      const lastBytes = 500_000 + (lines - 1) * 10_000;
      const latest = () => (sent.at(-1)?.download as { downloadedBytes?: number } | undefined)?.downloadedBytes;
      for (let i = 0; i < 100 && latest() !== lastBytes; i++) await new Promise((res) => setTimeout(res, 50));
      const progressPatches = sent.slice(1);
      const percentSteps = new Set(progressPatches.map((s) => s.progress)).size;
      expect(lines).to.be.greaterThan(20);
      expect(progressPatches.length, JSON.stringify(progressPatches.map((s) => s.progress)))
        .to.be.at.most(percentSteps + Math.ceil((Date.now() - started) / 300) + 1);
      expect(progressPatches.every((s) => s.download !== undefined), 'a percent step carries the figures').to.equal(true);
      expect(latest(), 'the latest figures go out in the end').to.equal(lastBytes);
    });

    it('records a stored file and forgets a deleted one as merge patches of status.storedFiles, in order with the steps, retried', async () => {
      const sent: RunnerStatusPatch[] = [];
      let fail = 1;
      const r = new StatusReporter({
        namespace: 'ns', name: 'mj', logger: silent, backoffMs: 1,
        sink: { async patch(s) { if (s.storedFiles && fail-- > 0) throw Object.assign(new Error('unavailable'), { code: 503 }); sent.push(s); } },
      });
      void r.setStep('Uploading', 66);
      void r.storedFile('k1/videos/a.mp4', 1234);
      void r.storedFile('k1/videos/a.mp4', null);
      await r.finish({ outcome: 'failed', error: 'Upload failed' });
      expect(sent.slice(0, 3)).to.deep.equal([
        { step: 'Uploading', progress: 66 }, { storedFiles: { 'k1/videos/a.mp4': 1234 } }, { storedFiles: { 'k1/videos/a.mp4': null } },
      ]);
      // The final report leaves storedFiles to the operator, who deletes what the result does not name.
      expect(sent[3]).not.to.have.property('storedFiles');
    });

    it('keeps trying a stored file\'s patch through an outage a step change gives up on', async () => {
      const sent: RunnerStatusPatch[] = [];
      let down = 6; // six refused requests: a step change's four attempts are spent, a stored file's eight are not
      const r = new StatusReporter({
        namespace: 'ns', name: 'mj', logger: silent, backoffMs: 1,
        sink: { async patch(s) { if (down-- > 0) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }); sent.push(s); } },
      });
      await r.storedFile('k1/videos/a.mp4', 1234);
      expect(sent).to.deep.equal([{ storedFiles: { 'k1/videos/a.mp4': 1234 } }]);
      expect(r.failures).to.equal(0);
      down = 6;
      await r.setStep('Uploading', 66);
      expect(r.failures).to.equal(1);
      expect(sent).to.have.length(1);
    });

    it('gives up on a hung API server instead of holding the job', async () => {
      const r = new StatusReporter({ namespace: 'ns', name: 'mj', logger: silent, backoffMs: 1, attempts: 2, requestTimeoutMs: 30, sink: { patch: () => new Promise<void>(() => undefined) } });
      const started = Date.now();
      await r.setStep('Downloading', 0);
      expect(Date.now() - started).to.be.below(1000);
      expect(r.failures).to.equal(1);
    });

    it('does not retry a patch the API refuses for good (e.g. the MediaJob is gone)', async () => {
      let calls = 0;
      const r = new StatusReporter({ namespace: 'ns', name: 'mj', logger: silent, backoffMs: 1, sink: { async patch() { calls++; throw Object.assign(new Error('nf'), { code: 404 }); } } });
      await r.setStep('Downloading', 0);
      expect(calls).to.equal(1);
    });
  });

  describe('termination message', () => {
    it('stays valid JSON under 4 KiB whatever the description', () => {
      const report = { step: 'Finished', progress: 100, outcome: 'completed', result: { storageKey: 'videos/x.mp4', fileSize: 1, title: 'T'.repeat(3000), description: 'ü'.repeat(20_000) } } as const;
      const msg = terminationMessage(report);
      expect(Buffer.byteLength(msg)).to.be.at.most(MAX_TERMINATION_MESSAGE_BYTES);
      const parsed = JSON.parse(msg) as typeof report;
      expect(parsed.outcome).to.equal('completed');
      expect(parsed.result.storageKey).to.equal('videos/x.mp4');
      const small = { outcome: 'failed', error: 'e', errorType: 'error' } as const;
      expect(JSON.parse(terminationMessage(small))).to.deep.equal(small);
    });
  });
});
