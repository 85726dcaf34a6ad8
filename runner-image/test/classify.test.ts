// Failure classification against what yt-dlp really prints. The YouTube
// lines are the playability reasons yt-dlp passes through as
// `ERROR: [youtube] <id>: <reason>` (extractor/youtube/_video.py); the
// network lines are yt-dlp 2023.03.04's own output here (urllib wording) and
// the newer networking layer's TransportError wording.
import { expect } from 'chai';
import {
  CONTENT_CATEGORIES, MESSAGES, TECHNICAL_CATEGORIES, classification, classifyFfmpeg, classifyRecorder, classifyUpload, classifyYtDlp,
  isStorageUnreachable, type ErrorCategory,
} from '../src/classify.js';
import { StorageError } from '@mediajobs/lib/storage/types';
import { YTDLP_REASON_KIND, YTDLP_RULES } from '@mediajobs/lib/media-info/ytdlp-messages';
import { CATEGORY_OF_REASON } from '../src/classify.js';
import { STDERR_CASES } from '../../lib/test/media-info-fixtures.js';

const YTDLP_CASES: [string, ErrorCategory][] = [
  // bot detection (U+2019 and ASCII apostrophe; yt-dlp appends its login hint)
  ["ERROR: [youtube] dQw4w9WgXcQ: Sign in to confirm you\u2019re not a bot. Use --cookies-from-browser or --cookies for the authentication. See  https://github.com/yt-dlp/yt-dlp/wiki/FAQ#how-do-i-pass-cookies-to-yt-dlp  for how to manually pass cookies. Also see  https://github.com/yt-dlp/yt-dlp/wiki/Extractors#exporting-youtube-cookies  for tips on effectively exporting YouTube cookies", 'bot_detection'],
  ["ERROR: [youtube] abc: Sign in to confirm you're not a bot. This helps protect our community. Learn more", 'bot_detection'],
  // rate limiting: YouTube's session limit opens with "Video unavailable"
  ["ERROR: [youtube] abc: Video unavailable. This content isn't available, try again later. The current session has been rate-limited by YouTube for up to an hour. It is recommended to use `-t sleep` to add a delay between video requests to avoid exceeding the rate limit.", 'rate_limited'],
  ['ERROR: unable to download video data: HTTP Error 429: Too Many Requests', 'rate_limited'],
  ['ERROR: [generic] None: Unable to download webpage: HTTP Error 429: Too Many Requests (caused by <HTTPError 429: Too Many Requests>)', 'rate_limited'],
  // content warnings
  ["ERROR: [youtube] abc: Private video. Sign in if you've been granted access to this video. Use --cookies-from-browser or --cookies for the authentication.", 'private'],
  ['ERROR: [youtube] abc: Video unavailable. This video is private', 'private'],
  ['ERROR: [instagram] x: This account is private', 'private'],
  ['ERROR: [youtube] abc: Join this channel to get access to members-only content like this video, and other exclusive perks.', 'members_only'],
  ["ERROR: [youtube] abc: This video is available to this channel's members on level: Tier 2 (or any higher level). Join this channel to get access to members-only content and other exclusive perks.", 'members_only'],
  ['ERROR: [youtube] abc: Sign in to confirm your age. This video may be inappropriate for some users. Use --cookies-from-browser or --cookies for the authentication.', 'age_restricted'],
  ['ERROR: [youtube] abc: Video unavailable. The uploader has not made this video available in your country. This video is available in Germany, France.', 'geo_blocked'],
  ['ERROR: [youtube] abc: The uploader has not made this video available in your country', 'geo_blocked'],
  ['ERROR: [vimeo] 123: This video is not available from your location due to geo restriction. You might want to use a VPN or a proxy server (with --proxy) to workaround.', 'geo_blocked'],
  ['ERROR: [youtube] abc: Video unavailable. This video is no longer available because the YouTube account associated with this video has been terminated.', 'channel_terminated'],
  ['ERROR: [youtube] abc: Video unavailable. This video is no longer available because the uploader has closed their YouTube account.', 'channel_terminated'],
  ['ERROR: [youtube] abc: Video unavailable. This video is no longer available due to a copyright claim by Example Records', 'copyright'],
  ['ERROR: [youtube] abc: Video unavailable. This video contains content from Example, who has blocked it in your country on copyright grounds.', 'copyright'],
  ['ERROR: [youtube] abc: Video unavailable. This video has been removed by the uploader', 'unavailable'],
  ["ERROR: [youtube] abc: Video unavailable. This video has been removed for violating YouTube's Terms of Service", 'unavailable'],
  ['ERROR: [youtube] aaaaaaaaaaa: Video unavailable', 'unavailable'],
  ['WARNING: [youtube] unable to extract yt initial data; please report this issue\nERROR: [youtube] aaaaaaaaaaa: This video is unavailable', 'unavailable'],
  ["ERROR: [generic] None: Unable to download webpage: HTTP Error 404: File not found (caused by <HTTPError 404: 'File not found'>); please report this issue on  https://github.com/yt-dlp/yt-dlp/issues?q= , filling out the appropriate issue template. Confirm you are on the latest version using  yt-dlp -U", 'unavailable'],
  ['ERROR: [generic] Unable to download webpage: HTTP Error 410: Gone (caused by <HTTPError 410: Gone>)', 'unavailable'],
  ['ERROR: Unsupported URL: https://example.com/page', 'unavailable'],
  ['ERROR: [youtube] abc: Premieres in 3 hours', 'upcoming'],
  ['ERROR: [youtube] abc: This live event will begin in 2 days.', 'upcoming'],
  ['ERROR: [youtube] abc: This video is DRM protected', 'drm_protected'],
  // connection errors
  ["ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused> (caused by URLError(ConnectionRefusedError(111, 'Connection refused')))", 'connection_error'],
  ["ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno -2] Name or service not known> (caused by URLError(gaierror(-2, 'Name or service not known')))", 'connection_error'],
  ["ERROR: [generic] None: Unable to download webpage: [Errno -3] Temporary failure in name resolution (caused by TransportError('[Errno -3] Temporary failure in name resolution'))", 'connection_error'],
  ['ERROR: [generic] None: Unable to download webpage: <urlopen error timed out> (caused by URLError(timeout(\'timed out\')))', 'connection_error'],
  ['ERROR: unable to download video data: The read operation timed out', 'connection_error'],
  ['ERROR: [download] Got error: Connection reset by peer', 'connection_error'],
  ['ERROR: [generic] None: Unable to download webpage: HTTP Error 503: Service Unavailable (caused by <HTTPError 503: Service Unavailable>)', 'connection_error'],
  ['ERROR: [generic] None: Unable to download webpage: HTTP Error 500: Internal Server Error (caused by <HTTPError 500: Internal Server Error>)', 'connection_error'],
  ['ERROR: unable to download video data: HTTP Error 403: Forbidden', 'connection_error'],
  ['ERROR: unable to download video data: HTTP Error 404: Not Found', 'connection_error'],
  ['ERROR: fragment 3 not found, unable to continue', 'connection_error'],
  ['ERROR: [youtube] abc: Unable to download API page: [Errno 101] Network is unreachable (caused by TransportError(\'[Errno 101] Network is unreachable\'))', 'connection_error'],
  ["ERROR: [generic] None: Unable to download webpage: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1006)", 'connection_error'],
  // processing
  ['ERROR: Postprocessing: Conversion failed!', 'processing_failed'],
  ['ERROR: ffmpeg exited with code 1', 'processing_failed'],
  ['ERROR: unable to write data: [Errno 28] No space left on device', 'processing_failed'],
  // yt-dlp's newer YouTube wordings (extractor/youtube/_video.py): the captcha
  // challenge and the blocked-IP player response are bot checks too
  ['ERROR: [youtube] abc: Video unavailable. YouTube is requiring a captcha challenge before playback', 'bot_detection'],
  ['ERROR: [youtube] abc: All player responses are invalid. Your IP is likely being blocked by Youtube', 'bot_detection'],
  ["ERROR: [youtube] abc: Video unavailable. This content isn\u2019t available, try again later. Your account has been rate-limited by YouTube for up to an hour.", 'rate_limited'],
  // live: utils.UserNotLive's default text, an ended live event
  ['ERROR: [twitch:stream] somebody: The channel is not currently live', 'upcoming'],
  ['ERROR: [youtube] abc: This live event has ended.', 'unavailable'],
  // the HLS downloader's own DRM check (downloader/hls.py, FairPlay key in a media playlist)
  ['ERROR: This video is DRM protected; Try selecting another format with --format or add --check-formats to automatically fallback to the next best format', 'drm_protected'],
  // generic extractor on a FairPlay master (YoutubeDL.raise_no_formats with _has_drm), as yt-dlp 2023.03.04 prints it here
  ['ERROR: [generic] master: This video is DRM protected', 'drm_protected'],
  // anything else
  ['ERROR: something new and unexpected', 'download_failed'],
  ['Traceback (most recent call last):\n  File "yt_dlp/__main__.py", line 1\nKeyError: \'formats\'', 'download_failed'],
];

describe('runner: failure classification', () => {
  describe('yt-dlp', () => {
    for (const [stderr, category] of YTDLP_CASES) {
      it(`${category} ← ${stderr.split('\n').pop()!.slice(0, 90)}`, () => {
        expect(classifyYtDlp(stderr, 1).category).to.equal(category);
      });
    }

    it('reads only ERROR lines when there are any: a sign-in warning does not relabel the error', () => {
      const stderr = 'WARNING: [youtube] Sign in to see more formats; private video formats skipped\nERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused>';
      expect(classifyYtDlp(stderr, 1).category).to.equal('connection_error');
    });

    it('reads yt-dlp with the table /metadata and /is-short use: a technical reason fails the job, a content reason warns', () => {
      expect(Object.keys(CATEGORY_OF_REASON).sort()).to.deep.equal(YTDLP_RULES.map(([r]) => r).sort());
      for (const [reason, kind] of Object.entries(YTDLP_REASON_KIND)) {
        const c = classification(CATEGORY_OF_REASON[reason as keyof typeof YTDLP_REASON_KIND]);
        expect(c.errorType, reason).to.equal(kind === 'technical' ? 'error' : 'warning');
      }
    });

    // The lookups' own cases (lib/test/media-info-fixtures.ts): the same
    // text means the same to a job, at the job's coarser grain.
    const JOB_CATEGORY: Record<string, ErrorCategory> = { timeout: 'connection_error', upstream_error: 'connection_error', unsupported: 'unavailable' };
    for (const [stderr, lookup] of STDERR_CASES.filter(([text]) => /^ERROR:/m.test(text))) {
      const want = JOB_CATEGORY[lookup] ?? (lookup as ErrorCategory);
      it(`as a lookup reads it: ${want} ← ${stderr.slice(0, 80)}`, () => {
        expect(classifyYtDlp(stderr, 1).category).to.equal(want);
      });
    }

    it('a usage error (exit 2, no ERROR line) is ours, not the media\'s', () => {
      expect(classifyYtDlp('yt-dlp: error: no such option: --bogus', 2).category).to.equal('internal_error');
    });

    it('DRM on an audio-only item is Skipped; on a video it is a content warning', () => {
      const stderr = 'ERROR: [youtube] abc: This video is DRM protected';
      expect(classifyYtDlp(stderr, 1, { audioOnlySource: true })).to.include({ outcome: 'skipped', reason: 'drm_audio_only' });
      expect(classifyYtDlp(stderr, 1)).to.include({ outcome: 'warning', errorType: 'warning' });
    });
  });

  describe('outcomes and messages', () => {
    it('technical categories fail with errorType error; content categories warn', () => {
      for (const c of TECHNICAL_CATEGORIES) expect(classification(c), c).to.include({ outcome: 'failed', errorType: 'error' });
      for (const c of CONTENT_CATEGORIES) expect(classification(c), c).to.include({ outcome: 'warning', errorType: 'warning' });
    });

    it('storage_unreachable carries the spec reason', () => {
      expect(classification('storage_unreachable')).to.include({ reason: 'storage_unreachable', outcome: 'failed' });
    });

    it('messages are fixed phrases: no host, address, port, path, URL or tool output', () => {
      const secretStderr = "ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused> http://10.1.2.3:8080/x?token=abc /tmp/mediajob-x/f00001.mp4";
      const c = classifyYtDlp(secretStderr, 1);
      expect(c.error).to.equal(MESSAGES.connection_error);
      for (const msg of Object.values(MESSAGES)) {
        expect(msg).to.not.match(/https?:|\d+\.\d+\.\d+\.\d+|:\d{2,5}\b|\/tmp|token|ERROR/);
      }
      expect(MESSAGES.private).to.equal('Video is private');
      expect(MESSAGES.connection_error).to.equal('Connection error while downloading the media');
    });
  });

  describe('ffmpeg and upload', () => {
    it('any ffmpeg failure is a processing failure', () => {
      expect(classifyFfmpeg('[mp4 @ 0x55] Could not find tag for codec vp8 in stream #0', 1)).to.include({ category: 'processing_failed', outcome: 'failed', errorType: 'error' });
    });

    it('storage errors: unreachable, auth, not_found and invalid_config mean storage_unreachable; failed/conflict mean upload failed', () => {
      for (const code of ['unreachable', 'auth', 'not_found', 'invalid_config'] as const) {
        expect(classifyUpload(new StorageError(code, 'x', 'm')), code).to.include({ category: 'storage_unreachable', reason: 'storage_unreachable' });
      }
      for (const code of ['failed', 'conflict'] as const) {
        const c = classifyUpload(new StorageError(code, 'x', 'm'));
        expect(c, code).to.include({ category: 'upload_failed', errorType: 'error' });
        expect(c.reason).to.equal(undefined);
      }
    });

    it('foreign errors: socket and SDK auth failures are unreachable; others are upload failures', () => {
      expect(isStorageUnreachable(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:9000'), { code: 'ECONNREFUSED' }))).to.equal(true);
      expect(isStorageUnreachable({ name: 'InvalidAccessKeyId', $metadata: { httpStatusCode: 403 } })).to.equal(true);
      expect(isStorageUnreachable(new Error('x', { cause: { code: 'ENOTFOUND' } }))).to.equal(true);
      expect(isStorageUnreachable(new Error('stream premature close'))).to.equal(false);
      expect(classifyUpload(new Error('boom')).category).to.equal('upload_failed');
    });

    it('the live recorder: a missing stream is unavailable, network trouble a connection error (ffmpeg 5.1 wording)', () => {
      expect(classifyRecorder('http://127.0.0.1:35419/nothere.m3u8: Server returned 404 Not Found').category).to.equal('unavailable');
      expect(classifyRecorder('[tcp @ 0x5] Connection to tcp://127.0.0.1:1 failed: Connection refused\nhttp://127.0.0.1:1/x.m3u8: Connection refused').category).to.equal('connection_error');
      expect(classifyRecorder('[tcp @ 0x5] Failed to resolve hostname nonexistent.invalid: Name or service not known\nhttp://nonexistent.invalid/x.m3u8: Input/output error').category).to.equal('connection_error');
      expect(classifyRecorder('http://h/x.m3u8: Server returned 5XX Server Error reply').category).to.equal('connection_error');
      expect(classifyRecorder('[mpegts @ 0x5] Could not write header for output file #0').category).to.equal('processing_failed');
    });

    it('a failure reading our own file is a processing failure, whatever the provider saw', () => {
      expect(classifyUpload(new StorageError('unreachable', 'x', 'm'), { localReadFailed: true }).category).to.equal('processing_failed');
    });
  });
});
