import { expect } from 'chai';
import { cleanCause } from '../src/cause-line.js';

describe('cleanCause: the one cleaned cause line (transition log, error_detail)', () => {
  it('keeps the first line that says something, URLs without credentials or queries', () => {
    expect(cleanCause('\n  ERROR: unable to download https://user:pa55@cdn.example/v.mp4?token=abc#t=1: HTTP Error 403\nsecond line', 'https://cdn.example/v.mp4'))
      .to.equal('ERROR: unable to download https://cdn.example/v.mp4?…: HTTP Error 403');
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
    expect(cleanCause('open(\'/var/run/secrets/token\') failed; see file:///home/runner/x.log and ~/cache/y, not http://h.example/a/b', 'http://h.example/v'))
      .to.equal('open(\'<path>\') failed; see <path> and <path>, not http://h.example/a/b');
  });

  it('no infrastructure detail: a URL of another host is <url>, a private, loopback or link-local address or a cluster name is <host>, the source\'s own host stays', () => {
    const source = 'https://media.example/show/v.mp4?sig=abc';
    expect(cleanCause('ERROR: Unable to download: HTTP Error 407 via http://egress-7.mediajobs-system.svc.cluster.local:3128 (10.42.0.17)', source))
      .to.equal('ERROR: Unable to download: HTTP Error 407 via <url> (<host>)');
    expect(cleanCause('ERROR: https://media.example/show/v.mp4?sig=abc redirected to https://cdn-3.other.example/x.mp4?e=1, then socks5h://u:p@proxy.example:1080 failed', source))
      .to.equal('ERROR: https://media.example/show/v.mp4?… redirected to <url>, then <url> failed');
    expect(cleanCause('connect to 192.168.1.5:8080, 172.20.0.3, 127.0.0.1, 169.254.169.254 and 100.64.3.2 refused; 8.8.8.8 and 172.32.0.1 answered', source))
      .to.equal('connect to <host>, <host>, <host>, <host> and <host> refused; 8.8.8.8 and 172.32.0.1 answered');
    expect(cleanCause('dial [fd00:10:244::17]:3128, fe80::1%eth0 and ::1 and ::ffff:10.0.0.1 failed; 2001:db8::1 at 00:00:05', source))
      .to.equal('dial <host>, <host> and <host> and <host> failed; 2001:db8::1 at 00:00:05');
    expect(cleanCause('resolve egress.mediajobs-system.svc, redis.internal:6379 and localhost failed; foo.svc.example.com did not', source))
      .to.equal('resolve <host>, <host> and <host> failed; foo.svc.example.com did not');
    expect(cleanCause('fetch //user:pass@mirror.example/x.mp4 and ./cache/x.part, ../y and file:/etc/passwd failed', source))
      .to.equal('fetch <url> and <path>, <path> and <path> failed');
  });

  it('the source\'s own host survives when it is loopback or private (test media on 127.0.0.1), without its credentials; no source masks every URL', () => {
    const source = 'http://127.0.0.1:41234/media/clip.mp4';
    expect(cleanCause('ERROR: http://u:pw@127.0.0.1:41234/media/clip.mp4?x=1: HTTP Error 404 (127.0.0.1:41234); proxy 127.0.0.2 down', source))
      .to.equal('ERROR: http://127.0.0.1:41234/media/clip.mp4?…: HTTP Error 404 (127.0.0.1:41234); proxy <host> down');
    expect(cleanCause('ERROR: http://[::1]:8080/v.mp4: refused', 'http://[::1]:8080/v.mp4')).to.equal('ERROR: http://[::1]:8080/v.mp4: refused');
    expect(cleanCause('ERROR: http://media.internal/v.mp4 not found', 'http://MEDIA.internal/v.mp4')).to.equal('ERROR: http://media.internal/v.mp4 not found');
    expect(cleanCause('ERROR: https://media.example/v.mp4: 403', undefined)).to.equal('ERROR: <url>: 403');
    expect(cleanCause('ERROR: rtmp://media.example/live: 403', 'not a url')).to.equal('ERROR: <url>: 403');
  });

  it('a line of only noise is still a line (nothing better was said)', () => {
    expect(cleanCause('WARNING: something odd')).to.equal('WARNING: something odd');
  });
});
