import { expect } from 'chai';
import { cleanCause } from '../src/cause-line.js';

describe('cleanCause: the one cleaned cause line (transition log, error_detail)', () => {
  it('keeps the first line that says something, URLs without credentials or queries', () => {
    expect(cleanCause('\n  ERROR: unable to download https://user:pa55@cdn.example/v.mp4?token=abc#t=1: HTTP Error 403\nsecond line'))
      .to.equal('ERROR: unable to download https://cdn.example/v.mp4?… HTTP Error 403');
  });

  it('censors the value of secret-named pairs, leaves other words, bounds the length and has nothing for an empty cause', () => {
    expect(cleanCause('login failed: password=hunter2, api_key: "k 1" Authorization: Bearer abc.def; storage: full'))
      .to.equal('login failed: password=[redacted], api_key: [redacted] Authorization: [redacted]; storage: full');
    expect(cleanCause('x'.repeat(300))).to.have.length(200);
    expect(cleanCause(' \n ')).to.equal(undefined);
    expect(cleanCause(undefined)).to.equal(undefined);
  });

  it('censors prefixed secret names, every cookie of a Cookie header, and a scheme\'s credentials however spaced', () => {
    expect(cleanCause('ERROR: refresh failed: access_token=a1 refresh_token=r2 client_secret=c3 X-Auth-Token: t4 passwd=p5'))
      .to.equal('ERROR: refresh failed: access_token=[redacted] refresh_token=[redacted] client_secret=[redacted] X-Auth-Token: [redacted] passwd=[redacted]');
    expect(cleanCause('ERROR: sent Cookie: a=1; session=s3cr3t; theme=dark')).to.equal('ERROR: sent Cookie: [redacted]');
    expect(cleanCause('ERROR: Authorization:  Bearer   abc.def rejected')).to.equal('ERROR: Authorization:  [redacted] rejected');
    expect(cleanCause('ERROR: token budget exceeded')).to.equal('ERROR: token budget exceeded');
  });

  it('ffmpeg on a corrupt MP4: the demuxer\'s cause, without its address, not the input line naming a path or URL', () => {
    const stderr = [
      '[mov,mp4,m4a,3gp,3g2,mj2 @ 0x55d0c1e2a9c0] moov atom not found',
      'https://media.example/v.mp4?X-Amz-Signature=abc: Invalid data found when processing input',
    ].join('\n');
    expect(cleanCause(stderr)).to.equal('[mov,mp4,m4a,3gp,3g2,mj2] moov atom not found');
    expect(cleanCause('/tmp/mj-run-x/dl/f1.mp4: Invalid data found when processing input')).to.equal('<path>: Invalid data found when processing input');
  });

  it('skips a banner, a stream dump, debug, progress and warnings for yt-dlp\'s ERROR: line, colours stripped', () => {
    const stderr = [
      'ffmpeg version 5.1.6-0+deb12u1 Copyright (c) 2000-2024 the FFmpeg developers',
      '  built with gcc 12 (Debian 12.2.0-14)',
      '  libavutil      57. 28.100 / 57. 28.100',
      '[debug] Command-line config: [\'-f\', \'best\']',
      '[download]  42.0% of 1.00MiB at 100KiB/s ETA 00:05',
      'WARNING: [generic] Falling back on generic information extractor',
      '\u001b[0;31mERROR:\u001b[0m [generic] Unable to download webpage: HTTP Error 404: Not Found (caused by <HTTPError 404: Not Found>)',
    ].join('\n');
    expect(cleanCause(stderr)).to.equal('ERROR: [generic] Unable to download webpage: HTTP Error 404: Not Found (caused by <HTTPError 404: Not Found>)');
    expect(cleanCause('ffmpeg version 5.1\n  built with gcc\nInput #0, mov, from \'/x/y.mp4\':\n  Duration: 00:00:03.00\nConversion failed!'))
      .to.equal('Conversion failed!');
  });

  it('paths go wherever a word starts, file: URLs too; a URL\'s own path stays', () => {
    expect(cleanCause('open(\'/var/run/secrets/token\') failed; see file:///home/runner/x.log and ~/cache/y, not http://h.example/a/b'))
      .to.equal('open(\'<path>\') failed; see <path> and <path>, not http://h.example/a/b');
  });

  it('a line of only noise is still a line (nothing better was said)', () => {
    expect(cleanCause('WARNING: something odd')).to.equal('WARNING: something odd');
  });
});
