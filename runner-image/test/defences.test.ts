// The defence table (classify.ts defenceOf, runner-image/README.md
// "Defences"): what a platform answered, as yt-dlp prints it (lines from
// yt-dlp's source: extractor/youtube/_video.py's playability reasons and
// hints, extractor/generic.py's Cloudflare challenge, common.py's
// raise_login_required) and as the egress proxy saw it on plain-http
// requests, read into the kind the operator answers. Content verdicts
// ("Sign in to confirm your age", private videos) are never defences.
import { expect } from 'chai';
import type { EgressAnswer } from '@mediajobs/lib/egress-proxy';
import { classifyYtDlp, defenceOf, retryAfterSeconds, signatureExpired, type DefenceFinding } from '../src/classify.js';
import { ytdlpAgeDays, ytdlpReleaseDate } from '../src/tool-versions.js';

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);
const PAST = Math.floor(NOW / 1000) - 600;
const FUTURE = Math.floor(NOW / 1000) + 3600;
const HINT = 'Use --cookies-from-browser or --cookies for the authentication. See  https://github.com/yt-dlp/yt-dlp/wiki/FAQ#how-do-i-pass-cookies-to-yt-dlp  for how to manually pass cookies';

interface Case {
  what: string;
  stderr: string;
  afterProbe?: boolean;
  answers?: EgressAnswer[];
  mediaUrls?: string[];
  defence: DefenceFinding | undefined;
}

const answer = (status: number, more: Partial<EgressAnswer> = {}): EgressAnswer => ({ url: 'http://media.test/v.mp4', status, challenge: false, ...more });

const CASES: Case[] = [
  { what: 'YouTube\'s bot check (curly apostrophe, login hint)', stderr: `ERROR: [youtube] dQw4w9WgXcQ: Sign in to confirm you\u2019re not a bot. ${HINT}`, defence: { kind: 'bot_check' } },
  { what: 'the bot check without the hint', stderr: 'ERROR: [youtube] abc: Sign in to confirm you\'re not a bot. This helps protect our community. Learn more', defence: { kind: 'bot_check' } },
  { what: 'YouTube\'s captcha', stderr: 'ERROR: [youtube] abc: Playback on other websites has been disabled. YouTube is requiring a captcha challenge before playback', defence: { kind: 'captcha' } },
  {
    what: 'the generic extractor\'s Cloudflare challenge',
    stderr: 'ERROR: [generic] Got HTTP Error 403 caused by Cloudflare anti-bot challenge; try again with  --extractor-args "generic:impersonate"',
    defence: { kind: 'captcha' },
  },
  { what: 'a challenge page seen by the egress (cf-mitigated)', stderr: 'ERROR: [generic] None: Unable to download webpage: HTTP Error 403: Forbidden', answers: [answer(403, { challenge: true })], defence: { kind: 'captcha' } },
  {
    what: 'YouTube\'s session rate limit (no Retry-After)',
    stderr: 'ERROR: [youtube] abc: Video unavailable. This content isn\'t available, try again later. The current session has been rate-limited by YouTube for up to an hour.',
    defence: { kind: 'rate_limited' },
  },
  { what: 'a 429 the egress saw with Retry-After seconds', stderr: 'ERROR: [generic] None: Unable to download webpage: HTTP Error 429: Too Many Requests', answers: [answer(429, { retryAfter: '120' })], defence: { kind: 'rate_limited', retryAfterSeconds: 120 } },
  {
    what: 'the latest 429\'s Retry-After, as an HTTP date',
    stderr: 'ERROR: unable to download video data: HTTP Error 429: Too Many Requests',
    answers: [answer(429, { retryAfter: '5' }), answer(429, { retryAfter: new Date(NOW + 90_000).toUTCString() })],
    defence: { kind: 'rate_limited', retryAfterSeconds: 90 },
  },
  { what: 'a 429 through a tunnel (https): no Retry-After to read', stderr: 'ERROR: unable to download video data: HTTP Error 429: Too Many Requests', defence: { kind: 'rate_limited' } },
  { what: 'a login demand (raise_login_required)', stderr: `ERROR: [vimeo] 123: This video is only available for registered users. ${HINT}`, defence: { kind: 'sign_in' } },
  { what: 'an extractor\'s "login required"', stderr: 'ERROR: [instagram] Cx1: Login required to access this content', defence: { kind: 'sign_in' } },
  { what: 'the page answered 403: a ban of the exit', stderr: 'ERROR: [generic] None: Unable to download webpage: HTTP Error 403: Forbidden', defence: { kind: 'forbidden' } },
  {
    what: 'the media answered 403 after the probe, its signature still valid: a ban',
    stderr: 'ERROR: unable to download video data: HTTP Error 403: Forbidden', afterProbe: true, mediaUrls: [`http://media.test/v.mp4?expire=${FUTURE}&sig=x`],
    defence: { kind: 'forbidden' },
  },
  {
    what: 'the media answered 403 after the probe, its expire= in the past: an expired URL',
    stderr: 'ERROR: unable to download video data: HTTP Error 403: Forbidden', afterProbe: true, mediaUrls: [`http://media.test/v.mp4?expire=${PAST}&sig=x`],
    defence: { kind: 'expired_url' },
  },
  {
    what: 'the 403 the egress saw names an expired Expires=',
    stderr: 'ERROR: unable to download video data: HTTP Error 403: Forbidden', afterProbe: true, answers: [answer(403, { url: `http://cdn.test/seg1.ts?Expires=${PAST}&Signature=s` })],
    defence: { kind: 'expired_url' },
  },
  {
    what: 'ffmpeg\'s 403 on a direct read of an expired S3-presigned URL',
    stderr: 'ERROR: [https @ 0x55] HTTP error 403 Forbidden\nServer returned 403 Forbidden (access denied)', afterProbe: true,
    mediaUrls: ['https://bucket.test/v.mp4?X-Amz-Date=20261129T100000Z&X-Amz-Expires=600&X-Amz-Signature=abc'],
    defence: { kind: 'expired_url' },
  },
  { what: 'our own egress refusal is not the platform\'s', stderr: 'ERROR: [generic] None: Unable to download webpage: HTTP Error 403: Refused by egress policy', defence: undefined },
  { what: 'an age gate is content', stderr: `ERROR: [youtube] abc: Sign in to confirm your age. This video may be inappropriate for some users. ${HINT}`, defence: undefined },
  { what: 'a private video is content', stderr: `ERROR: [youtube] abc: Private video. Sign in if you've been granted access to this video. ${HINT}`, defence: undefined },
  { what: 'a 404 is content', stderr: 'ERROR: [generic] None: Unable to download webpage: HTTP Error 404: Not Found', defence: undefined },
  { what: 'a refused connection is no defence', stderr: 'ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused>', defence: undefined },
  { what: 'a warning about sign-in is not the error', stderr: `WARNING: [youtube] abc: Sign in to confirm you\u2019re not a bot\nERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused>`, defence: undefined },
];

describe('runner: the defence table', () => {
  for (const c of CASES) {
    it(`${c.what} → ${c.defence?.kind ?? 'no defence'}`, () => {
      const category = classifyYtDlp(c.stderr, 1).category;
      expect(defenceOf({ category }, { stderr: c.stderr, afterProbe: c.afterProbe ?? false, answers: c.answers ?? [], mediaUrls: c.mediaUrls, now: NOW })).to.deep.equal(c.defence);
    });
  }

  it('keeps the category the retry policy reads: bot_detection, rate_limited, connection_error or download_failed', () => {
    const categories = CASES.filter((c) => c.defence).map((c) => classifyYtDlp(c.stderr, 1).category);
    expect([...new Set(categories)].sort()).to.deep.equal(['bot_detection', 'connection_error', 'download_failed', 'rate_limited']);
  });

  it('reads Retry-After as seconds or an HTTP date, bounded to a day; nonsense is ignored', () => {
    expect(retryAfterSeconds('30', NOW)).to.equal(30);
    expect(retryAfterSeconds(new Date(NOW + 45_500).toUTCString(), NOW)).to.equal(45);
    expect(retryAfterSeconds(new Date(NOW - 5000).toUTCString(), NOW)).to.equal(0);
    expect(retryAfterSeconds('9999999', NOW)).to.equal(86_400);
    expect(retryAfterSeconds('soon', NOW)).to.equal(undefined);
  });

  it('reads a signed URL\'s expiry from expire=, Expires=, /expire/<t>/ and X-Amz-Date + X-Amz-Expires; no expiry is no expired URL', () => {
    expect(signatureExpired(`https://r1.googlevideo.test/videoplayback?expire=${PAST}&ip=x`, NOW)).to.equal(true);
    expect(signatureExpired(`https://r1.googlevideo.test/videoplayback/expire/${PAST}/sig/x/`, NOW)).to.equal(true);
    expect(signatureExpired(`https://d1.cloudfront.test/a.mp4?Expires=${FUTURE}&Signature=s`, NOW)).to.equal(false);
    expect(signatureExpired('https://b.test/a?X-Amz-Date=20261129T115000Z&X-Amz-Expires=60', NOW)).to.equal(true);
    expect(signatureExpired('https://b.test/a?X-Amz-Date=20261129T115000Z&X-Amz-Expires=3600', NOW)).to.equal(false);
    expect(signatureExpired('https://b.test/a.mp4', NOW)).to.equal(false);
    expect(signatureExpired('not a url', NOW)).to.equal(false);
  });
});

describe('runner: yt-dlp\'s age from its version', () => {
  it('reads release and nightly versions as dates; a git build has none', () => {
    expect(ytdlpReleaseDate('2023.03.04')?.toISOString()).to.equal('2023-03-04T00:00:00.000Z');
    expect(ytdlpReleaseDate('2026.08.19.233512')?.toISOString()).to.equal('2026-08-19T00:00:00.000Z');
    expect(ytdlpReleaseDate('2026.02.31')).to.equal(undefined);
    expect(ytdlpReleaseDate('abc123-dirty')).to.equal(undefined);
    expect(ytdlpAgeDays('2026.08.31', NOW)).to.equal(90);
    expect(ytdlpAgeDays('2023.03.04', NOW)).to.be.greaterThan(1000);
  });
});
