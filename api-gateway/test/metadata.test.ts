// POST /metadata and POST /is-short through the gateway on real Postgres,
// with the real yt-dlp reading media made with ffmpeg and served on loopback.
//
// The platform cannot be reached from here, so requests carry the
// platform's URL forms and the documented test seam (MEDIA_INFO_URL_MAP,
// here the extractor's urlMap option) hands yt-dlp a local URL instead,
// after validation and canonicalisation. Platform states no local media can
// produce (private, scheduled and live streams) are covered by a replay
// program in yt-dlp's place (MEDIA_INFO_YTDLP) that prints what yt-dlp
// prints for them; everything else is the real yt-dlp.
import { expect } from 'chai';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MediaInfoExtractor } from '@mediajobs/lib/media-info/index';
import { DEFAULT_OUTBOUND_POLICY } from '@mediajobs/lib/outbound';
import { startMediaServer, unreachableUrl, type MediaServer } from '../../test/support/media.js';
import {
  ACCEPTED, INFO_LIVE, INFO_LIVE_NO_DIMENSIONS, INFO_SHORT, INFO_UPCOMING, NOT_VIDEOS, OTHER_PLATFORMS,
} from '../../lib/test/media-info-fixtures.js';
import {
  makeHls, processesWith, removeDir, scratchDir, startNeverEndingPage, startStaticServer, type NeverEndingPage, type StaticServer,
} from '../../lib/test/media-info-support.js';
import { materialize, startTestGateway, type TestGateway } from './support.js';

const WATCH = 'https://www.youtube.com/watch?v=';
const HORIZONTAL = `${WATCH}horizontal1`;
const VERTICAL = `${WATCH}vertical001`;
const DIRECT = `${WATCH}direct00mp4`;
const UNREACHABLE = `${WATCH}unreachabl1`;
const NEVER_ENDING = `${WATCH}neverending`;

type Json = Record<string, unknown>;

describe('api-gateway: POST /metadata and POST /is-short', function () {
  this.timeout(180_000);
  let dir: string;
  let media: MediaServer;
  let vertical: StaticServer;
  let slow: NeverEndingPage;
  let gw: TestGateway;
  let unreachable: string;

  before(async () => {
    dir = await scratchDir();
    const verticalPath = await makeHls(dir, 'vertical', [{ width: 180, height: 320 }, { width: 360, height: 640 }]);
    [media, vertical, slow] = await Promise.all([startMediaServer(), startStaticServer(dir), startNeverEndingPage()]);
    unreachable = await unreachableUrl();
    const verticalUrl = `${vertical.baseUrl}/${verticalPath}`;
    const urlMap = new Map<string, string>([
      [HORIZONTAL, media.hlsUrl],
      [VERTICAL, verticalUrl],
      [DIRECT, media.mp4Url],
      [UNREACHABLE, unreachable],
      [NEVER_ENDING, slow.url],
      ['https://media.example/clip.mp4', media.mp4Url],
      ['https://media.example/gone.mp4', media.notFoundUrl],
      ['https://media.example/broken.mp4', media.serverErrorUrl],
      ['https://media.example/unreachable.mp4', unreachable],
      // Every id of the URL-form table reads the vertical clip.
      ...ACCEPTED.map(([, , id]): [string, string] => [`${WATCH}${id}`, verticalUrl]),
    ]);
    // Production's policy, not the test support's loopback allowance: local URLs are refused here.
    gw = await startTestGateway({ mediaInfo: new MediaInfoExtractor({ urlMap }), outbound: DEFAULT_OUTBOUND_POLICY });
  });

  after(async () => {
    await gw?.stop();
    await Promise.all([media?.stop(), vertical?.stop(), slow?.stop()]);
    if (dir) await removeDir(dir);
  });

  const isShort = (url: unknown, key?: string | null) => gw.request('POST', '/is-short', { body: { url }, ...(key !== undefined && { key }) });
  const metadata = (url: unknown, key?: string | null) => gw.request('POST', '/metadata', { body: { url }, ...(key !== undefined && { key }) });

  describe('authentication', () => {
    it('/is-short without a key: 401 Missing API key (its own wording)', async () => {
      for (const key of [null, '']) {
        const r = await isShort(HORIZONTAL, key);
        expect(r.status).to.equal(401);
        expect(r.body).to.deep.equal({ error: 'Missing API key' });
      }
    });
    it('/metadata without a key: 401 Missing x-api-key header', async () => {
      const r = await metadata(HORIZONTAL, null);
      expect(r.status).to.equal(401);
      expect(r.body).to.deep.equal({ error: 'Missing x-api-key header' });
    });
    it('an unknown key: 401 Invalid API Key on both', async () => {
      for (const call of [isShort, metadata]) {
        const r = await call(HORIZONTAL, 'mj_not-a-real-key');
        expect(r.status).to.equal(401);
        expect(r.body).to.deep.equal({ error: 'Invalid API Key' });
      }
    });
    it('authentication comes before the body', async () => {
      for (const path of ['/is-short', '/metadata']) {
        const r = await gw.request('POST', path, { key: null, raw: '{bad', headers: { 'content-type': 'application/json' } });
        expect(r.status, path).to.equal(401);
      }
    });
  });

  describe('request bodies: 4xx, never 500', () => {
    for (const path of ['/is-short', '/metadata']) {
      it(`${path}: content type, JSON, and the url field`, async () => {
        const cases: [{ raw?: string; body?: unknown; headers?: Record<string, string> }, number, string][] = [
          [{ raw: JSON.stringify({ url: HORIZONTAL }), headers: { 'content-type': 'text/plain' } }, 415, 'Content-Type must be application/json'],
          [{ raw: '{"url":', headers: { 'content-type': 'application/json' } }, 400, 'Invalid JSON body'],
          [{ raw: '"just a string"', headers: { 'content-type': 'application/json' } }, 400, 'Invalid JSON body'],
          [{ body: [HORIZONTAL] }, 400, 'Request body must be a JSON object'],
          [{ body: {} }, 400, "Missing required field 'url'"],
          [{ body: { url: 7 } }, 400, "Invalid field 'url': must be a string"],
          [{ body: { url: 'not a url' } }, 400, "Invalid field 'url': must be an http or https URL"],
          [{ body: { url: 'ytsearch:cats' } }, 400, "Invalid field 'url': must be an http or https URL"],
          [{ raw: JSON.stringify({ url: 'x'.repeat(20_000) }), headers: { 'content-type': 'application/json' } }, 413, 'Request body too large'],
        ];
        for (const [opts, status, error] of cases) {
          const r = await gw.request('POST', path, opts);
          expect([r.status, r.body], JSON.stringify(opts).slice(0, 80)).to.deep.equal([status, { error }]);
        }
      });
    }
  });

  describe('POST /is-short', () => {
    it('horizontal HLS (ladder up to 720p): a video, from the best format', async () => {
      const r = await isShort(HORIZONTAL);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ is_short: false, video_type: 'video', width: 1280, height: 720, aspect_ratio: 720 / 1280, duration_seconds: 0 });
      expect(r.headers.get('cache-control')).to.equal('no-store');
    });

    it('vertical HLS (360x640, made here): a short, aspect ratio height/width', async () => {
      const r = await isShort(VERTICAL);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ is_short: true, video_type: 'short', width: 360, height: 640, aspect_ratio: 640 / 360, duration_seconds: 0 });
    });

    it('one URL of each form, through the real yt-dlp', async () => {
      // The whole table goes through the replay extractor below (cheaper
      // than a Python start per URL); here each form meets the real thing.
      const firstOfEachForm = [...new Map(ACCEPTED.map(([url, form]) => [form, url])).values()];
      expect(firstOfEachForm).to.have.length(6);
      for (const url of firstOfEachForm) {
        const r = await isShort(url);
        expect([r.status, (r.body as Json).video_type], url).to.deep.equal([200, 'short']);
      }
    });

    it('other platforms and mirrors: 400 naming the accepted forms', async () => {
      for (const url of OTHER_PLATFORMS) {
        const r = await isShort(url);
        expect(r.status, url).to.equal(400);
        expect((r.body as Json).error, url).to.match(/^Unsupported URL: only YouTube video URLs are accepted \(watch\?v=<id>, youtu\.be\/<id>, \/shorts\/<id>, \/embed\/<id>, \/live\/<id>\)$/);
      }
    });

    it('pages of the platform that are not one video: 400', async () => {
      for (const url of NOT_VIDEOS) {
        const r = await isShort(url);
        expect(r.status, url).to.equal(400);
        expect((r.body as Json).error, url).to.match(/^Unsupported YouTube URL: not a single video/);
      }
    });

    it('dimensions still unknown after the full run (a direct MP4): 502, never a guess', async () => {
      const r = await isShort(DIRECT);
      expect(r.status).to.equal(502);
      expect(r.body).to.deep.equal({ error: 'Temporary classification error (video dimensions unavailable), please retry' });
    });

    it('nothing listening: 502 within the bounds', async () => {
      const t0 = Date.now();
      const r = await isShort(UNREACHABLE);
      expect(r.status).to.equal(502);
      expect(r.body).to.deep.equal({ error: 'Temporary network error, please retry' });
      expect(Date.now() - t0).to.be.below(6_000 + 20_000);
    });

    it('reads manifests only: not one media segment was requested', () => {
      expect(vertical.paths.length).to.be.greaterThan(0);
      expect(vertical.paths.filter((p) => !p.endsWith('.m3u8'))).to.deep.equal([]);
    });
  });

  describe('POST /metadata', () => {
    it('HLS behind a platform URL: the spec fields', async () => {
      const r = await metadata(`https://youtu.be/horizontal1?list=PLx`);
      expect(r.status).to.equal(200);
      // What the source does not say is left out: the contract lists no field as null.
      expect(r.body).to.deep.equal({ title: 'master', width: 1280, height: 720, extractor: 'generic', upload_date: '20240315' });
      expect(r.headers.get('cache-control')).to.equal('no-store');
    });

    it('any http(s) URL yt-dlp can read; what a direct file does not say is left out, never null', async () => {
      const r = await metadata('https://media.example/clip.mp4');
      expect(r.status).to.equal(200);
      expect(r.text).to.equal('{"title":"video","extractor":"generic","upload_date":"20240315"}');
    });

    it('content that is not there: 422 Failed to extract metadata, with details', async () => {
      const r = await metadata('https://media.example/gone.mp4');
      expect(r.status).to.equal(422);
      expect(r.body).to.deep.equal({ error: 'Failed to extract metadata', details: 'Video is unavailable or has been removed' });
    });

    it('upstream trouble: 502 with a retry hint', async () => {
      const broken = await metadata('https://media.example/broken.mp4');
      expect([broken.status, broken.body]).to.deep.equal([502, { error: 'Failed to extract metadata', details: 'Temporary platform error, please retry' }]);
      const down = await metadata('https://media.example/unreachable.mp4');
      expect([down.status, down.body]).to.deep.equal([502, { error: 'Failed to extract metadata', details: 'Temporary network error, please retry' }]);
    });
  });

  describe('side effects', () => {
    it('nothing charged: no job, no usage counter, no MediaJob', async () => {
      expect(Number((await gw.pool.query('SELECT count(*) AS n FROM jobs')).rows[0].n)).to.equal(0);
      expect(Number((await gw.pool.query('SELECT count(*) AS n FROM job_counters')).rows[0].n)).to.equal(0);
      expect(await materialize(gw.pool)).to.deep.equal({ jobs: [], batches: [] });
    });

    it('failures are logged with yt-dlp\'s reason, without URLs or the key', () => {
      const lines = gw.logs.lines.map((l) => JSON.parse(l) as Json).filter((l) => l.msg === 'info lookup failed');
      const down = lines.find((l) => l.failure === 'connection_error');
      expect(down).to.not.equal(undefined);
      expect(String((down!.details as string[])[0])).to.match(/Connection refused/);
      expect(gw.logs.text()).not.to.contain(new URL(unreachable).host);
      expect(gw.logs.text()).not.to.contain(slow.url);
    });
  });
});

describe('api-gateway: lookup bounds, disconnects and the concurrency limit', function () {
  this.timeout(60_000);
  let slow: NeverEndingPage;
  let gw: TestGateway;
  let mediaInfo: MediaInfoExtractor;
  const LIGHT = 1500;
  const FULL = 2500;

  before(async () => {
    slow = await startNeverEndingPage();
    // The spec's bounds are 6 s and 20 s (the defaults, and the maximum the
    // configuration accepts); the same code with shorter bounds keeps this quick.
    mediaInfo = new MediaInfoExtractor({ lightTimeoutMs: LIGHT, fullTimeoutMs: FULL, maxConcurrent: 1, urlMap: new Map([[NEVER_ENDING, slow.url]]) });
    gw = await startTestGateway({ mediaInfo });
  });

  after(async () => {
    await gw?.stop();
    await slow?.stop();
  });

  it('a source that never finishes: 502 once both runs hit their bounds', async () => {
    for (const path of ['/is-short', '/metadata']) {
      const t0 = Date.now();
      const r = await gw.request('POST', path, { body: { url: NEVER_ENDING } });
      const ms = Date.now() - t0;
      expect(r.status, path).to.equal(502);
      expect(r.body, path).to.deep.equal(path === '/is-short'
        ? { error: 'Temporary timeout error, please retry' }
        : { error: 'Failed to extract metadata', details: 'Temporary timeout error, please retry' });
      expect(ms, path).to.be.within(LIGHT + FULL, LIGHT + FULL + 2_000);
      expect(await slow.allClosed(2_000)).to.equal(true);
    }
  });

  it('the client disconnects: yt-dlp is killed, the slot is free again', async () => {
    const key = (await gw.newKey('d2')).key;
    const controller = new AbortController();
    const pending = fetch(`${gw.url}/is-short`, {
      method: 'POST', signal: controller.signal,
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ url: NEVER_ENDING }),
    }).catch((err: Error) => err.name);
    while (slow.open === 0) await new Promise((r) => setTimeout(r, 20));
    expect(await processesWith(slow.url)).to.have.length(1);
    controller.abort();
    expect(await pending).to.equal('AbortError');
    // Well before the light bound would have ended it.
    expect(await slow.allClosed(LIGHT - 500)).to.equal(true);
    expect(await processesWith(slow.url)).to.deep.equal([]);
    expect(mediaInfo.running).to.equal(0);
    const lines = gw.logs.lines.map((l) => JSON.parse(l) as Json);
    expect(lines.some((l) => l.msg === 'info lookup abandoned: client disconnected')).to.equal(true);
  });

  it('over MEDIA_INFO_MAX_CONCURRENT: 503 with Retry-After at once', async () => {
    const key = (await gw.newKey('busy')).key;
    const controller = new AbortController();
    const first = fetch(`${gw.url}/metadata`, {
      method: 'POST', signal: controller.signal,
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ url: NEVER_ENDING }),
    }).catch(() => undefined);
    while (mediaInfo.running === 0) await new Promise((r) => setTimeout(r, 20));
    const r = await gw.request('POST', '/is-short', { body: { url: NEVER_ENDING } });
    expect(r.status).to.equal(503);
    expect(r.body).to.deep.equal({ error: 'Temporary overload error (too many lookups in progress), please retry' });
    expect(r.headers.get('retry-after')).to.equal('1');
    controller.abort();
    await first;
  });

  it('over MEDIA_INFO_MAX_PER_KEY: 429 for that key with Retry-After, while another key still gets a slot', async () => {
    const perKey = new MediaInfoExtractor({ lightTimeoutMs: LIGHT, fullTimeoutMs: FULL, maxConcurrent: 4, maxPerKey: 1, urlMap: new Map([[NEVER_ENDING, slow.url]]) });
    const own = await startTestGateway({ mediaInfo: perKey });
    const controller = new AbortController();
    const lookup = (key: string, path: string) => fetch(`${own.url}${path}`, {
      method: 'POST', signal: controller.signal, headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify({ url: NEVER_ENDING }),
    }).catch(() => undefined);
    try {
      const [a, b] = [(await own.newKey('a')).key, (await own.newKey('b')).key];
      const first = lookup(a, '/metadata');
      while (perKey.running === 0) await new Promise((r) => setTimeout(r, 20));
      const again = await own.request('POST', '/is-short', { key: a, body: { url: NEVER_ENDING } });
      expect(again.status).to.equal(429);
      expect(again.body).to.deep.equal({ error: 'Too many lookups in progress for this API key, please retry' });
      expect(again.headers.get('retry-after')).to.equal('1');
      const other = lookup(b, '/is-short');
      while (perKey.running < 2) await new Promise((r) => setTimeout(r, 20));
      expect(perKey.running, 'the other key runs beside it').to.equal(2);
      controller.abort();
      await Promise.all([first, other]);
    } finally {
      controller.abort();
      await own.stop();
    }
  });
});

describe('api-gateway: platform states replayed (private, scheduled and live streams)', function () {
  this.timeout(60_000);
  let dir: string;
  let gw: TestGateway;

  // What yt-dlp prints for each state, keyed by video id.
  const PRIVATE = `ERROR: [youtube] privatevid1: Private video. Sign in if you've been granted access to this video\n`;
  const REPLAYS: Record<string, { stdout?: unknown; stderr?: string; exit: number }> = {
    privatevid1: { stdout: null, stderr: PRIVATE, exit: 1 },
    // With --ignore-no-formats-error the reason can arrive as a warning beside info without formats.
    privatevid2: { stdout: { id: 'privatevid2', title: 'privatevid2', formats: [], live_status: 'not_live', extractor: 'youtube' }, stderr: `WARNING: [youtube] privatevid2: Private video. Sign in if you've been granted access to this video\nWARNING: No video formats found!\n`, exit: 0 },
    upcoming001: { stdout: { ...INFO_UPCOMING, id: 'upcoming001' }, stderr: 'WARNING: [youtube] upcoming001: This live event will begin in 3 hours.\nWARNING: No video formats found!\n', exit: 0 },
    livenow0001: { stdout: INFO_LIVE, exit: 0 },
    livenodims1: { stdout: INFO_LIVE_NO_DIMENSIONS, exit: 0 },
    membersonly: { stdout: null, stderr: 'ERROR: [youtube] membersonly: Join this channel to get access to members-only content like this video, and other exclusive perks.\n', exit: 1 },
    // The ids of the URL-form table: a Short each.
    ...Object.fromEntries(ACCEPTED.map(([, , id]) => [id, { stdout: { ...INFO_SHORT, id }, exit: 0 }])),
  };

  before(async () => {
    dir = await scratchDir();
    for (const [id, replay] of Object.entries(REPLAYS)) await writeFile(join(dir, `${id}.json`), JSON.stringify(replay));
    const script = join(dir, 'replay.mjs');
    // Refuses (exit 2, as yt-dlp does for bad usage) unless handed exactly
    // `-- https://www.youtube.com/watch?v=<id>` at the end, so a 200 proves
    // which URL the gateway gave the extractor.
    await writeFile(script, [
      "import { readFileSync } from 'node:fs';",
      'const [sep, url] = process.argv.slice(-2);',
      'if (sep !== "--" || !/^https:\\/\\/www\\.youtube\\.com\\/watch\\?v=[\\w-]{11}$/.test(url)) { process.stderr.write(`bad invocation: ${url}`); process.exit(2); }',
      'const id = new URL(url).searchParams.get("v");',
      'const r = JSON.parse(readFileSync(`${process.argv[2]}/${id}.json`, "utf8"));',
      "if ('stdout' in r) process.stdout.write(JSON.stringify(r.stdout));",
      "if (r.stderr) process.stderr.write(r.stderr);",
      'process.exitCode = r.exit;',
    ].join('\n'));
    gw = await startTestGateway({ mediaInfo: new MediaInfoExtractor({ command: [process.execPath, script, dir] }) });
  });

  after(async () => {
    await gw?.stop();
    if (dir) await removeDir(dir);
  });

  const isShort = (id: string) => gw.request('POST', '/is-short', { body: { url: `https://youtu.be/${id}` } });

  it('every URL form of the table reaches the extractor as the canonical watch URL', async () => {
    for (const [url, form, id] of ACCEPTED) {
      const r = await gw.request('POST', '/is-short', { body: { url } });
      expect([r.status, (r.body as Json).video_type], `${form} ${url} (${id})`).to.deep.equal([200, 'short']);
    }
  });

  it('a private video: 403 Video is private (error or warning), on both endpoints', async () => {
    for (const id of ['privatevid1', 'privatevid2']) {
      const r = await isShort(id);
      expect([r.status, r.body], id).to.deep.equal([403, { error: 'Video is private' }]);
    }
    const m = await gw.request('POST', '/metadata', { body: { url: `${WATCH}privatevid1` } });
    expect([m.status, m.body]).to.deep.equal([403, { error: 'Failed to extract metadata', details: 'Video is private' }]);
  });

  it('a scheduled stream that has not started: live, null dimensions, not short', async () => {
    const r = await isShort('upcoming001');
    expect([r.status, r.body]).to.deep.equal([200, { is_short: false, video_type: 'live', width: null, height: null, aspect_ratio: null, duration_seconds: 0 }]);
    const m = await gw.request('POST', '/metadata', { body: { url: `${WATCH}upcoming001` } });
    expect(m.status).to.equal(200);
    expect(m.body).to.deep.include({ extractor: 'youtube' }).and.not.have.any.keys('width', 'height', 'duration');
  });

  it('a live stream: live, with the dimensions of its best HLS format', async () => {
    const r = await isShort('livenow0001');
    expect([r.status, r.body]).to.deep.equal([200, { is_short: false, video_type: 'live', width: 1920, height: 1080, aspect_ratio: 1080 / 1920, duration_seconds: 0 }]);
  });

  it('a live stream without video dimensions: nulls and is_short false, not a 502', async () => {
    const r = await isShort('livenodims1');
    expect([r.status, r.body]).to.deep.equal([200, { is_short: false, video_type: 'live', width: null, height: null, aspect_ratio: null, duration_seconds: 0 }]);
  });

  it('members-only: 422, and no second run for a content verdict', async () => {
    const r = await isShort('membersonly');
    expect([r.status, r.body]).to.deep.equal([422, { error: 'Video is available to channel members only' }]);
    const line = gw.logs.lines.map((l) => JSON.parse(l) as Json).find((l) => l.failure === 'members_only');
    expect((line?.attempts as unknown[]).length).to.equal(1);
  });
});

// The outbound-address policy in front of the extractor: a refused URL is a
// 400 and no extractor runs. The extractor here is a program that only
// records that it ran, so a policy that wrongly let a URL through would
// show up as a record, never as a request to that address.
describe('api-gateway: refused source addresses never reach the extractor', function () {
  this.timeout(60_000);
  let dir: string;
  let runs: string;
  let gw: TestGateway;

  before(async () => {
    dir = await scratchDir();
    runs = join(dir, 'runs.log');
    const script = join(dir, 'record.mjs');
    await writeFile(script, "import { appendFileSync } from 'node:fs';\nappendFileSync(process.argv[2], process.argv.slice(3).join(' ') + '\\n');\nprocess.exitCode = 1;\n");
    // Production's policy, not the test support's loopback allowance.
    gw = await startTestGateway({
      outbound: DEFAULT_OUTBOUND_POLICY,
      mediaInfo: new MediaInfoExtractor({ command: [process.execPath, script, runs] }),
    });
  });

  after(async () => {
    await gw?.stop();
    if (dir) await removeDir(dir);
  });

  const REFUSED = "Invalid field 'url': local and link-local addresses are not allowed";
  const cases: [string, string[]][] = [
    ['loopback and link-local', ['http://127.0.0.1:8080/x.mp4', 'http://localhost/x.mp4', 'http://169.254.169.254/latest/meta-data/', 'http://[fe80::1]/x.mp4']],
    ['private networks and IPv4 inside IPv6', ['http://10.1.2.3/x.mp4', 'http://192.168.1.20/x.mp4', 'http://[fd00::1]/x.mp4', 'http://[::ffff:127.0.0.1]/x.mp4', 'http://[64:ff9b::a9fe:a9fe]/']],
  ];
  for (const [what, urls] of cases) {
    it(`${what}: 400, and nothing runs`, async () => {
      for (const url of urls) {
        const r = await gw.request('POST', '/metadata', { body: { url } });
        expect([r.status, r.body], url).to.deep.equal([400, { error: REFUSED }]);
      }
      expect(await readFile(runs, 'utf8').catch(() => '')).to.equal('');
    });
  }

  it('an allowed URL does reach it (the record works)', async () => {
    await gw.request('POST', '/metadata', { body: { url: `${WATCH}recorded001` } });
    expect(await readFile(runs, 'utf8')).to.include(`${WATCH}recorded001`);
  });
});
