// Which segments a clip of a segmented source fetches (sections.ts): the
// cut of yt-dlp's DASH fragment lists, and HLS media playlists read into
// the same kind of list.
import { expect } from 'chai';
import { clipFragments, clipSections, hlsFragments } from '../src/sections.js';

const dash = [{ path: 'init.m4s' }, ...[0, 1, 2, 3, 4, 5].map((i) => ({ path: `c${i}.m4s`, duration: 2 }))];
const names = (fs: { path?: string; url?: string }[]) => fs.map((f) => f.path ?? f.url);

describe('runner: the segments a clip needs', () => {
  it('keeps the init segment and the media segments overlapping the clip, and says where they begin', () => {
    const cases: [{ start: number; end?: number }, string[] | undefined, number?, number?][] = [
      [{ start: 3, end: 5 }, ['init.m4s', 'c1.m4s', 'c2.m4s'], 2, 4],
      [{ start: 4, end: 6 }, ['init.m4s', 'c2.m4s'], 4, 2], // on segment boundaries: nothing on either side
      [{ start: 0, end: 1 }, ['init.m4s', 'c0.m4s'], 0, 2],
      [{ start: 9 }, ['init.m4s', 'c4.m4s', 'c5.m4s'], 8, 4], // to the end
      [{ start: 7, end: 99 }, ['init.m4s', 'c3.m4s', 'c4.m4s', 'c5.m4s'], 6, 6], // an end past the media
      [{ start: 0, end: 12 }, undefined], // all of it: nothing to cut
      [{ start: 20, end: 30 }, undefined], // past the end: nothing to keep
    ];
    for (const [clip, kept, offset, span] of cases) {
      const cut = clipFragments(dash, clip);
      expect(cut && names(cut.fragments), JSON.stringify(clip)).to.deep.equal(kept);
      if (cut) expect(cut.section, JSON.stringify(clip)).to.deep.equal({ offsetSeconds: offset, spanSeconds: span });
    }
  });

  it('keeps one segment more before the clip when segments need not start on a keyframe', () => {
    const cut = clipFragments(dash, { start: 5, end: 6 }, 1)!;
    expect(names(cut.fragments)).to.deep.equal(['init.m4s', 'c1.m4s', 'c2.m4s']);
    expect(cut.section).to.deep.equal({ offsetSeconds: 2, spanSeconds: 4 });
    expect(names(clipFragments(dash, { start: 1, end: 3 }, 1)!.fragments), 'none before the first').to.deep.equal(['init.m4s', 'c0.m4s', 'c1.m4s']);
  });

  it('cuts nothing when a media segment has no duration', () => {
    expect(clipFragments([{ path: 'init' }, { path: 'a', duration: 2 }, { path: 'b' }, { path: 'c', duration: 2 }], { start: 3 })).to.equal(undefined);
  });

  it('cuts only the chosen DASH formats, and leaves the page URL out so yt-dlp cannot start over with whole formats', () => {
    const info = {
      webpage_url: 'https://site.example/v', original_url: 'https://site.example/v',
      requested_formats: [{ format_id: 'v' }],
      formats: [
        { format_id: 'v', protocol: 'http_dash_segments', fragments: dash },
        { format_id: 'a', protocol: 'http_dash_segments', fragments: dash },
        { format_id: 'other', protocol: 'http_dash_segments', fragments: dash },
        { format_id: 'file', protocol: 'https', url: 'https://cdn.example/v.mp4' },
      ],
    };
    const cut = clipSections(info, ['v', 'a', 'file'], { start: 3, end: 5 })!;
    expect([...cut.sections.keys()]).to.deep.equal(['v', 'a']);
    expect(cut.info).to.not.have.any.keys('webpage_url', 'original_url', 'requested_formats');
    const byId = Object.fromEntries((cut.info.formats ?? []).map((f) => [f.format_id, f]));
    expect(names(byId.v!.fragments as { path: string }[])).to.deep.equal(['init.m4s', 'c1.m4s', 'c2.m4s']);
    expect(byId.other!.fragments).to.equal(dash);
    expect(clipSections(info, ['file'], { start: 3 })).to.equal(undefined);
  });

  describe('HLS media playlists', () => {
    const url = 'https://cdn.example/hls/v/index.m3u8';
    const vod = (body: string) => `#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n${body}\n#EXT-X-ENDLIST\n`;

    it('a VOD playlist becomes its init section and segments, with absolute URLs and durations', () => {
      const list = hlsFragments(vod('#EXT-X-MAP:URI="init.mp4"\n#EXTINF:2.0,\ns0.m4s\n#EXTINF:1.5,\n../shared/s1.m4s\n#EXTINF:2,\nhttps://other.example/s2.m4s'), url);
      expect(list?.independent).to.equal(false);
      expect(list?.fragments).to.deep.equal([
        { url: 'https://cdn.example/hls/v/init.mp4' },
        { url: 'https://cdn.example/hls/v/s0.m4s', duration: 2 },
        { url: 'https://cdn.example/hls/shared/s1.m4s', duration: 1.5 },
        { url: 'https://other.example/s2.m4s', duration: 2 },
      ]);
      expect(hlsFragments(vod('#EXT-X-INDEPENDENT-SEGMENTS\n#EXTINF:2,\na.ts\n#EXTINF:2,\nb.ts'), url)).to.deep.equal({
        fragments: [{ url: 'https://cdn.example/hls/v/a.ts', duration: 2 }, { url: 'https://cdn.example/hls/v/b.ts', duration: 2 }],
        independent: true,
      });
    });

    it('refuses what plain joining cannot fetch: live, encrypted, byte ranges, discontinuities, a master playlist', () => {
      const refused = {
        live: '#EXTM3U\n#EXTINF:2,\na.ts\n#EXTINF:2,\nb.ts\n',
        encrypted: vod('#EXT-X-KEY:METHOD=AES-128,URI="k.bin"\n#EXTINF:2,\na.ts'),
        byterange: vod('#EXTINF:2,\n#EXT-X-BYTERANGE:1000@0\nall.ts'),
        discontinuity: vod('#EXTINF:2,\na.ts\n#EXT-X-DISCONTINUITY\n#EXTINF:2,\nad.ts'),
        master: '#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000\nlow.m3u8\n',
      };
      for (const [name, text] of Object.entries(refused)) expect(hlsFragments(text, url), name).to.equal(undefined);
    });
  });
});
