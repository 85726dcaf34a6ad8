// Which URLs /is-short and /metadata take: the platform's single-video forms
// (from yt-dlp's YoutubeIE._VALID_URL and the URLs of its _TESTS), the
// other platforms and non-video pages that are refused, and the `url` field.
import { expect } from 'chai';
import { ACCEPTED_FORMS, metadataUrl, parsePlatformVideoUrl, platformUrlError, readUrlField } from '../src/media-info/platform-url.js';
import { OutboundPolicy } from '../src/outbound.js';
import { ACCEPTED, ID, NOT_VIDEOS, OTHER_PLATFORMS, WATCH } from './media-info-fixtures.js';

describe('media-info: accepted URLs', () => {
  describe('platform video forms (/is-short)', () => {
    for (const [url, form, id] of ACCEPTED) {
      it(`${url} → ${form} ${id}`, () => {
        const r = parsePlatformVideoUrl(url);
        expect(r).to.deep.equal({ ok: true, video: { videoId: id, form, canonicalUrl: `https://www.youtube.com/watch?v=${id}` } });
      });
    }
    it('every form the spec names is in the table', () => {
      const forms = new Set(ACCEPTED.map(([, f]) => f));
      for (const f of ['watch', 'short-link', 'shorts', 'embed', 'live'] as const) expect(forms.has(f), f).to.equal(true);
    });
    for (const url of OTHER_PLATFORMS) {
      it(`refuses another site: ${url}`, () => {
        expect(parsePlatformVideoUrl(url)).to.deep.equal({ ok: false, reason: 'other-platform' });
      });
    }
    for (const url of NOT_VIDEOS) {
      it(`refuses a non-video page of the platform: ${url}`, () => {
        expect(parsePlatformVideoUrl(url)).to.deep.equal({ ok: false, reason: 'not-a-video' });
      });
    }
    for (const input of [ID, `www.youtube.com/watch?v=${ID}`, `//www.youtube.com/watch?v=${ID}`, `ftp://www.youtube.com/watch?v=${ID}`, `ytsearch:${ID}`, 'not a url']) {
      it(`refuses a non-http(s) URL: ${input}`, () => {
        expect(parsePlatformVideoUrl(input)).to.deep.equal({ ok: false, reason: 'not-http-url' });
      });
    }
    it('says which forms are accepted', () => {
      expect(platformUrlError('other-platform')).to.equal(`Unsupported URL: only YouTube video URLs are accepted (${ACCEPTED_FORMS})`);
      expect(platformUrlError('not-a-video')).to.match(/^Unsupported YouTube URL: not a single video; accepted forms: watch\?v=<id>, youtu.be\/<id>/);
      expect(platformUrlError('not-http-url')).to.equal("Invalid field 'url': must be an http or https URL");
    });
  });

  describe('/metadata URLs', () => {
    it('takes any http(s) URL as given', () => {
      for (const url of ['https://vimeo.com/76979871', 'http://media.example/path/clip.mp4?token=a%20b', 'https://198.51.100.7/internal.mp4', 'http://[2001:db8::1]/v.mp4']) {
        expect(metadataUrl(url)).to.deep.equal({ ok: true, url });
      }
    });
    it('hands on the URL as parsed, which the policy judged: never a control character yt-dlp would read differently', () => {
      expect(metadataUrl('http://[::ffff:8.8.8.8]/v.mp4')).to.deep.equal({ ok: true, url: 'http://[::ffff:808:808]/v.mp4' });
      // A NUL is no process argument (spawn threw: a 500); tabs and newlines are dropped by the parser, not by yt-dlp.
      expect(metadataUrl('http://198.51.100.7/a\u0000b\u0000')).to.deep.equal({ ok: true, url: 'http://198.51.100.7/a%00b' });
      expect(metadataUrl(' http://198.51.100.7/\tv.mp4\n')).to.deep.equal({ ok: true, url: 'http://198.51.100.7/v.mp4' });
    });
    it('reduces a platform video URL to its watch URL, so list= never makes it a playlist', () => {
      expect(metadataUrl(`https://youtu.be/${ID}?list=PLwiyx1dc3P2JR9N8gQaQN_BCvlSlap7re`)).to.deep.equal({ ok: true, url: WATCH });
      expect(metadataUrl('https://www.youtube.com/playlist?list=PLx')).to.deep.equal({ ok: true, url: 'https://www.youtube.com/playlist?list=PLx' });
    });
    for (const url of [
      'http://localhost:8080/', 'http://127.0.0.1/video.mp4', 'http://127.1.2.3/', 'http://2130706433/', 'http://0x7f.1/',
      'http://169.254.169.254/latest/meta-data/', 'http://[::1]/', 'http://[fe80::1]/', 'http://[::ffff:127.0.0.1]/', 'http://[::ffff:169.254.169.254]/', 'http://0.0.0.0/',
      'http://api.localhost/',
      // private networks too, since the one outbound-address policy (lib/src/outbound.ts)
      'https://10.1.2.3/internal.mp4', 'http://192.168.0.10/', 'http://[fd00::1]/', 'http://[64:ff9b::7f00:1]/',
    ]) {
      it(`refuses a local address: ${url}`, () => {
        expect(metadataUrl(url)).to.deep.equal({ ok: false, error: "Invalid field 'url': local and link-local addresses are not allowed" });
      });
    }
    it('takes what the operator\'s allowance opens, never link-local', () => {
      const policy = new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128', '10.0.0.0/8'] });
      for (const url of ['http://127.0.0.1:8080/v.mp4', 'http://localhost:8080/v.mp4', 'https://10.1.2.3/internal.mp4']) {
        expect(metadataUrl(url, policy)).to.deep.equal({ ok: true, url });
      }
      expect(metadataUrl('http://169.254.169.254/latest/meta-data/', policy))
        .to.deep.equal({ ok: false, error: "Invalid field 'url': local and link-local addresses are not allowed" });
    });
    for (const url of ['file:///etc/passwd', 'ytsearch:cats', 'data:text/html,hi', 'javascript:alert(1)']) {
      it(`refuses a non-http(s) URL: ${url}`, () => {
        expect(metadataUrl(url)).to.deep.equal({ ok: false, error: "Invalid field 'url': must be an http or https URL" });
      });
    }
  });

  describe('the url field', () => {
    const cases: [unknown, string][] = [
      [{}, "Missing required field 'url'"],
      [{ url: null }, "Missing required field 'url'"],
      [{ url: '   ' }, "Missing required field 'url'"],
      [{ url: 42 }, "Invalid field 'url': must be a string"],
      [{ url: ['https://youtu.be/x'] }, "Invalid field 'url': must be a string"],
      [{ url: `https://example.com/${'a'.repeat(2100)}` }, "Invalid field 'url': must be at most 2048 characters"],
      [[], 'Request body must be a JSON object'],
      [null, 'Request body must be a JSON object'],
    ];
    for (const [body, error] of cases) {
      it(`${JSON.stringify(body).slice(0, 60)} → ${error}`, () => {
        expect(readUrlField(body)).to.deep.equal({ ok: false, error });
      });
    }
    it('trims the URL', () => {
      expect(readUrlField({ url: `  ${WATCH}\n` })).to.deep.equal({ ok: true, url: WATCH });
    });
  });
});
