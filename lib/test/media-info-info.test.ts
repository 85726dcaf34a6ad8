// The pure rules over yt-dlp's info JSON and stderr, table-tested with
// info in yt-dlp's own shapes: live and upcoming streams, storyboards and
// audio formats that must not count, DRM, direct links without dimensions,
// and the failure categories with their HTTP status.
import { expect } from 'chai';
import { assessClassification, assessMetadata } from '../src/media-info/assess.js';
import { loadConfig } from '../src/config.js';
import { mediaInfoOptions, mediaInfoSchema } from '../src/media-info/config.js';
import {
  FAILURES, classifyFailedRun, failureOfReason, failureStatus, logDetail, reasonFromMessages, worthFallback, type FailureCategory,
} from '../src/media-info/failures.js';
import { MAX_MATCHED_LINE, YTDLP_REASON_KIND, boundedLines, ytDlpReason, type YtDlpReason } from '../src/media-info/ytdlp-messages.js';
import { bestVideoDimensions, classifyVideo, isLive, metadataOf, type VideoClassification, type YtDlpInfo } from '../src/media-info/info.js';
import {
  INFO_DIRECT_MP4, INFO_DRM, INFO_LIVE, INFO_LIVE_BOOLEAN_ONLY, INFO_LIVE_NO_DIMENSIONS, INFO_LIVE_VERTICAL, INFO_PLAYLIST,
  INFO_POST_LIVE, INFO_REGULAR, INFO_SHORT, INFO_SINGLE_URL, INFO_SQUARE, INFO_UPCOMING, INFO_WAS_LIVE, STDERR_CASES,
} from './media-info-fixtures.js';

const info = (x: unknown) => x as YtDlpInfo;

describe('media-info: classification of yt-dlp info', () => {
  describe('is-short (spec rules 1–3)', () => {
    const cases: [string, unknown, VideoClassification | undefined][] = [
      ['regular 16:9 video: best format 1280x720', INFO_REGULAR,
        { isShort: false, videoType: 'video', width: 1280, height: 720, aspectRatio: 720 / 1280, durationSeconds: 10 }],
      ['Short 1080x1920, horizontal storyboards ignored', INFO_SHORT,
        { isShort: true, videoType: 'short', width: 1080, height: 1920, aspectRatio: 1920 / 1080, durationSeconds: 58 }],
      ['square video is not short', INFO_SQUARE,
        { isShort: false, videoType: 'video', width: 720, height: 720, aspectRatio: 1, durationSeconds: 10 }],
      ['live stream with HLS dimensions', INFO_LIVE,
        { isShort: false, videoType: 'live', width: 1920, height: 1080, aspectRatio: 1080 / 1920, durationSeconds: 0 }],
      ['vertical live stream: live, and is_short by its shape', INFO_LIVE_VERTICAL,
        { isShort: true, videoType: 'live', width: 720, height: 1280, aspectRatio: 1280 / 720, durationSeconds: 0 }],
      ['upcoming stream: live before it starts, null dimensions', INFO_UPCOMING,
        { isShort: false, videoType: 'live', width: null, height: null, aspectRatio: null, durationSeconds: 0 }],
      ['live stream without video dimensions: nulls, not short', INFO_LIVE_NO_DIMENSIONS,
        { isShort: false, videoType: 'live', width: null, height: null, aspectRatio: null, durationSeconds: 0 }],
      ['is_live without live_status', INFO_LIVE_BOOLEAN_ONLY,
        { isShort: false, videoType: 'live', width: null, height: null, aspectRatio: null, durationSeconds: 0 }],
      ['finished stream (was_live) is a video', INFO_WAS_LIVE,
        { isShort: false, videoType: 'video', width: 1920, height: 1080, aspectRatio: 1080 / 1920, durationSeconds: 7261 }],
      ['single-URL info: top-level dimensions', INFO_SINGLE_URL,
        { isShort: true, videoType: 'short', width: 1080, height: 1350, aspectRatio: 1350 / 1080, durationSeconds: 0 }],
      ['post_live without video formats: unknown, never a guess', INFO_POST_LIVE, undefined],
      ['DRM, storyboards only: unknown', INFO_DRM, undefined],
      ['direct MP4 without dimensions: unknown', INFO_DIRECT_MP4, undefined],
    ];
    for (const [name, fixture, expected] of cases) {
      it(name, () => {
        expect(classifyVideo(info(fixture))).to.deep.equal(expected);
      });
    }

    it('the best format is the last video format with dimensions in yt-dlp order, not the largest by area', () => {
      const formats = [{ vcodec: 'avc1', width: 1920, height: 1080 }, { vcodec: 'vp9', width: 1280, height: 720 }, { vcodec: 'av01', width: null, height: null }];
      expect(bestVideoDimensions({ formats })).to.deep.equal({ width: 1280, height: 720 });
    });
    it('audio-only formats and storyboards never give dimensions, even with width/height set', () => {
      expect(bestVideoDimensions({ formats: [{ vcodec: 'none', acodec: 'opus', width: 1, height: 2 }, { vcodec: 'mjpeg', format_note: 'storyboard', width: 160, height: 90 }] })).to.equal(undefined);
    });
    it('reads defensively: strings, zero and fractions are not dimensions', () => {
      expect(bestVideoDimensions(info({ formats: [{ width: '1280', height: 720 }, { width: 0, height: 720 }, { width: 12.5, height: 720 }] }))).to.equal(undefined);
      expect(bestVideoDimensions(info({ formats: 'nope', width: 10, height: 20 }))).to.deep.equal({ width: 10, height: 20 });
    });
    it('live_status decides over the boolean', () => {
      expect(isLive({ live_status: 'was_live', is_live: true })).to.equal(false);
      expect(isLive({ live_status: 'post_live' })).to.equal(false);
      expect(isLive({ live_status: 'is_upcoming' })).to.equal(true);
    });
  });

  describe('assess for /is-short', () => {
    it('classified info is an answer', () => {
      expect(assessClassification(info(INFO_SHORT), '')).to.deep.include({ ok: true });
    });
    it('no dimensions and no reason: no_dimensions (temporary, so the full run is tried)', () => {
      expect(assessClassification(info(INFO_DIRECT_MP4), '')).to.deep.equal({ ok: false, failure: 'no_dimensions' });
      expect(assessClassification(info(INFO_POST_LIVE), 'WARNING: [youtube] Falling back to generic n function search')).to.deep.equal({ ok: false, failure: 'no_dimensions' });
    });
    it('no formats and yt-dlp said why (a warning under --ignore-no-formats-error): that reason', () => {
      const stderr = `WARNING: [youtube] x: Private video. Sign in if you've been granted access to this video\nWARNING: No video formats found!`;
      expect(assessClassification(info({ id: 'x', title: 'x', formats: [], live_status: 'not_live' }), stderr)).to.deep.equal({ ok: false, failure: 'private' });
    });
    it('DRM formats dropped: drm_protected, from the flag or the warning', () => {
      expect(assessClassification(info(INFO_DRM), '')).to.deep.equal({ ok: false, failure: 'drm_protected' });
      expect(assessClassification(info({ ...INFO_DRM, _has_drm: null }), 'WARNING: [youtube] x: This video is DRM protected')).to.deep.equal({ ok: false, failure: 'drm_protected' });
    });
    it('a playlist is refused', () => {
      expect(assessClassification(info(INFO_PLAYLIST), '')).to.deep.equal({ ok: false, failure: 'playlist' });
    });
  });

  describe('metadata', () => {
    it('the spec fields of a YouTube video', () => {
      expect(metadataOf(info(INFO_REGULAR))).to.deep.equal({
        title: 'youtube-dl test video "\'/\\ä↭𝕐', duration: 10, width: 1280, height: 720, extractor: 'youtube',
        uploader: 'Philipp Hagemeister', thumbnail: 'https://i.ytimg.com/vi/BaW_jenozKc/maxresdefault.jpg',
        description: 'test chars:  "\'/\\ä↭𝕐\ntest URL: https://github.com/rg3/youtube-dl/issues/1892',
        viewCount: 1234567, likeCount: 12345, uploadDate: '20121002', filesizeApprox: 10_450_567,
      });
    });
    it('a direct link: what is known, the rest left out (the contract has no null for these fields)', () => {
      expect(metadataOf(info(INFO_DIRECT_MP4))).to.deep.equal({ title: 'video', extractor: 'generic', uploadDate: '20240315' });
    });
    it('prefers an exact filesize, falls back to the channel for the uploader, drops malformed values', () => {
      const m = metadataOf(info({ title: 't', filesize: 1000, filesize_approx: 2000, channel: 'C', upload_date: '2024-03-15', view_count: -1, like_count: 'many', duration: 12.5 }));
      expect(m).to.deep.equal({ title: 't', filesizeApprox: 1000, uploader: 'C', duration: 12.5 });
    });
    it('assess: media, live and upcoming streams are answers; nothing to play is a failure with its reason', () => {
      expect(assessMetadata(info(INFO_DIRECT_MP4), '').ok).to.equal(true);
      expect(assessMetadata(info(INFO_UPCOMING), 'WARNING: [youtube] UPCOMING001: This live event will begin in 3 hours.').ok).to.equal(true);
      expect(assessMetadata(info({ title: 'x', formats: [] }), `WARNING: [youtube] x: Video unavailable`)).to.deep.equal({ ok: false, failure: 'unavailable' });
      expect(assessMetadata(info({ title: 'x', formats: [] }), '')).to.deep.equal({ ok: false, failure: 'unavailable' });
      expect(assessMetadata(info(INFO_PLAYLIST), '')).to.deep.equal({ ok: false, failure: 'playlist' });
    });
  });

  describe('failures', () => {
    it('reads only the head of an over-long line (a source can echo 60 KB into one): the deciding words come first', () => {
      const noise = 'Unable to download webpage: '.repeat(2500); // ~70 KB, a match at every step of the 404 rule
      expect(ytDlpReason(`ERROR: [generic] x: Private video. ${noise}`)).to.equal('private');
      expect(ytDlpReason(`ERROR: [generic] x: ${'z'.repeat(70_000)} Private video`), 'past the head: not read').to.equal(undefined);
      const gone = classifyFailedRun('ERROR: [generic] x: Unable to download webpage: HTTP Error 404: Not Found');
      const unreachable = classifyFailedRun('ERROR: [generic] x: Unable to download webpage: <urlopen error [Errno 111] Connection refused>');
      expect(gone).to.not.equal(unreachable);
      expect(classifyFailedRun(`ERROR: [generic] x: Unable to download webpage: HTTP Error 404 ${noise}`), 'the 404 in the head').to.equal(gone);
      expect(classifyFailedRun(`ERROR: [generic] x: ${noise} HTTP Error 404`), 'the 404 past the head').to.equal(unreachable);
      const lines = boundedLines(`short\n${'y'.repeat(MAX_MATCHED_LINE + 10)}\nlast`).split('\n');
      expect(lines.map((l) => l.length)).to.deep.equal([5, MAX_MATCHED_LINE, 4]);
    });
    for (const [stderr, category] of STDERR_CASES) {
      it(`${category}: ${stderr.slice(0, 90)}`, () => {
        expect(classifyFailedRun(`[youtube] Extracting URL: https://www.youtube.com/watch?v=x\n${stderr}\n`)).to.equal(category);
      });
    }
    it('reads yt-dlp with the runner\'s table: content reasons are content verdicts, technical ones temporary', () => {
      for (const [reason, kind] of Object.entries(YTDLP_REASON_KIND)) {
        const failure = failureOfReason(reason as YtDlpReason);
        // A scheduled stream is answered as live, and a lookup has no post-processing: no failure of their own.
        if (reason === 'upcoming' || reason === 'processing_failed') {
          expect(failure, reason).to.equal(undefined);
          continue;
        }
        expect(failure, reason).to.be.a('string');
        expect(FAILURES[failure!].kind, reason).to.equal(kind === 'technical' ? 'temporary' : failure === 'private' ? 'private' : 'content');
      }
    });
    it('a 404 for the page is content that is not there; for anything else, trouble', () => {
      expect(classifyFailedRun('ERROR: [youtube] x: Unable to download API page: HTTP Error 404: Not Found (caused by <HTTPError 404: \'Not Found\'>)')).to.equal('unavailable');
      expect(classifyFailedRun('ERROR: [generic] None: Unable to download webpage: HTTP Error 410: Gone (caused by <HTTPError 410: Gone>)')).to.equal('unavailable');
      expect(classifyFailedRun('ERROR: unable to download video data: HTTP Error 404: Not Found')).to.equal('upstream_error');
    });
    it('ERROR lines decide over warnings', () => {
      expect(reasonFromMessages('WARNING: [youtube] x: HTTP Error 429: Too Many Requests\nERROR: [youtube] x: Private video')).to.equal('private');
    });
    it('nothing recognisable: a temporary extraction error', () => {
      expect(classifyFailedRun('Traceback (most recent call last):\n  KeyError: "foo"')).to.equal('extractor_error');
      expect(reasonFromMessages('')).to.equal(undefined);
    });
    it('status codes: private 403, content 422, temporary 502, busy 503, missing extractor 500', () => {
      const status = (c: FailureCategory) => failureStatus(c);
      expect(status('private')).to.equal(403);
      for (const c of ['unavailable', 'members_only', 'age_restricted', 'geo_blocked', 'drm_protected', 'unsupported', 'playlist', 'copyright', 'channel_terminated'] as const) expect(status(c), c).to.equal(422);
      for (const c of ['timeout', 'connection_error', 'upstream_error', 'rate_limited', 'bot_detection', 'no_dimensions', 'extractor_error'] as const) expect(status(c), c).to.equal(502);
      expect(status('busy')).to.equal(503);
      expect(status('extractor_missing')).to.equal(500);
    });
    it('every 502 and 503 message is a "Temporary ... error, please retry"', () => {
      for (const [c, f] of Object.entries(FAILURES)) {
        if ([502, 503].includes(failureStatus(c as FailureCategory))) expect(f.message, c).to.match(/^Temporary .*error.*, please retry$/);
      }
    });
    it('the full run is tried after temporary failures and geo-blocking, never after a content verdict', () => {
      const tried = (Object.keys(FAILURES) as FailureCategory[]).filter(worthFallback).sort();
      expect(tried).to.deep.equal(['bot_detection', 'connection_error', 'extractor_error', 'geo_blocked', 'no_dimensions', 'rate_limited', 'timeout', 'upstream_error']);
    });
    it('the log detail keeps the error line but no URL', () => {
      const d = logDetail('WARNING: x\nERROR: [generic] None: Unable to download webpage: https://user:pw@proxy.example:8000/x?sig=abc failed');
      expect(d).to.equal('ERROR: [generic] None: Unable to download webpage: <url> failed');
    });
  });

  describe('configuration', () => {
    it('defaults: yt-dlp on PATH, the spec bounds (6 s, 20 s), no proxy, no URL map', () => {
      const o = mediaInfoOptions(loadConfig(mediaInfoSchema, {}));
      expect(o).to.deep.equal({ command: ['yt-dlp'], extraArgs: [], lightTimeoutMs: 6000, fullTimeoutMs: 20000, maxConcurrent: 16, maxPerKey: 4, urlMap: new Map() });
    });
    it('reads every knob', () => {
      const o = mediaInfoOptions(loadConfig(mediaInfoSchema, {
        MEDIA_INFO_YTDLP: 'python3 -m yt_dlp', MEDIA_INFO_YTDLP_ARGS: ' --cookies /c.txt ', MEDIA_INFO_LIGHT_TIMEOUT_MS: '3000',
        MEDIA_INFO_FULL_TIMEOUT_MS: '9000', MEDIA_INFO_PROXY: 'http://user-session-{session}:pw@pool.example:8000', MEDIA_INFO_MAX_CONCURRENT: '4',
        MEDIA_INFO_MAX_PER_KEY: '2', MEDIA_INFO_URL_MAP: '{"https://www.youtube.com/watch?v=BaW_jenozKc": "http://127.0.0.1:9000/v.mp4"}',
      }));
      expect(o).to.deep.equal({
        command: ['python3', '-m', 'yt_dlp'], extraArgs: ['--cookies', '/c.txt'], lightTimeoutMs: 3000, fullTimeoutMs: 9000, maxConcurrent: 4, maxPerKey: 2,
        proxy: 'http://user-session-{session}:pw@pool.example:8000',
        urlMap: new Map([['https://www.youtube.com/watch?v=BaW_jenozKc', 'http://127.0.0.1:9000/v.mp4']]),
      });
    });
    for (const [name, value, problem] of [
      ['MEDIA_INFO_LIGHT_TIMEOUT_MS', '7000', 'above the spec bound'],
      ['MEDIA_INFO_FULL_TIMEOUT_MS', '25000', 'above the spec bound'],
      ['MEDIA_INFO_PROXY', 'ftp://proxy.example', 'not a proxy scheme'],
      ['MEDIA_INFO_PROXY', 'socks5://proxy.example:1080', 'a socks proxy, which the gateway\'s egress cannot chain'],
      ['MEDIA_INFO_URL_MAP', '["x"]', 'not an object'],
      ['MEDIA_INFO_URL_MAP', '{"https://a.example/": 5}', 'a non-URL value'],
      ['MEDIA_INFO_URL_MAP', '{bad json', 'not JSON'],
    ] as const) {
      it(`refuses ${name}=${value} (${problem})`, () => {
        expect(() => loadConfig(mediaInfoSchema, { [name]: value })).to.throw(new RegExp(name));
      });
    }
  });
});
