// Rule 8 from the URL alone: which POST /jobs URLs are a genuine playlist, a
// podcast show, or a single request, across the forms users paste.
import { expect } from 'chai';
import { detectBatchSource, type BatchSource } from '../src/batches/detect.js';

const V = 'dQw4w9WgXcQ';
const PL = 'PLBCF2DAC6FFB574DE';
const PL34 = 'PLrAXtmErZgOeiKm4sgNOknGvNjby9efdf';
const UU = 'UUuAXFkgsw1L7xaCfnd5JJOw';
const OL = 'OLAK5uy_kU2Xp6m4aQAXlrL6aXtTTPsOhKHGjJi3A';

const playlist = (listId: string): BatchSource => ({ kind: 'playlist', listId, canonicalUrl: `https://www.youtube.com/playlist?list=${listId}` });
const show = (podcastId: string): BatchSource => ({ kind: 'show', podcastId });
const single: BatchSource = { kind: 'single' };

const CASES: [string, BatchSource][] = [
  // Genuine playlists, whatever else the URL carries.
  [`https://www.youtube.com/playlist?list=${PL}`, playlist(PL)],
  [`https://www.youtube.com/playlist?list=${PL34}`, playlist(PL34)],
  [`https://www.youtube.com/watch?v=${V}&list=${PL}`, playlist(PL)],
  [`https://www.youtube.com/watch?v=${V}&list=${PL}&index=2&pp=iAQB`, playlist(PL)],
  [`https://www.youtube.com/watch?list=${PL}&v=${V}`, playlist(PL)],
  [`https://www.youtube.com/watch?v=${V}&list=${PL}#t=30`, playlist(PL)],
  [`https://www.youtube.com/watch?v=${V}&amp;list=${PL}`, playlist(PL)],
  [`https://youtu.be/${V}?list=${PL}`, playlist(PL)],
  [`https://youtu.be/${V}?si=Ab12Cd34&list=${PL}&t=10`, playlist(PL)],
  [`https://music.youtube.com/playlist?list=${OL}`, playlist(OL)],
  [`https://music.youtube.com/watch?v=${V}&list=${OL}`, playlist(OL)],
  [`https://m.youtube.com/playlist?list=${PL}`, playlist(PL)],
  [`https://m.youtube.com/watch?v=${V}&list=${UU}&index=4`, playlist(UU)],
  [`https://www.youtube.com/playlist?feature=share&list=${UU}`, playlist(UU)],
  [`https://www.youtube.com/embed/videoseries?list=${PL}`, playlist(PL)],
  [`https://www.youtube-nocookie.com/embed/videoseries?list=${PL}`, playlist(PL)],
  [`https://www.youtube.com/embed/${V}?list=${PL}`, playlist(PL)],
  [`https://WWW.YouTube.COM/playlist?list=${PL}`, playlist(PL)],
  [`https://www.youtube.com/playlist/?list=${PL}`, playlist(PL)],
  [`https://www.youtube.com/playlist?list=${PL}&si=xYz_123&feature=shared`, playlist(PL)],
  [`http://youtube.com/playlist?list=${PL}`, playlist(PL)],
  [`https://www.youtubekids.com/watch?v=${V}&list=${PL}`, playlist(PL)],
  [`https://www.youtube.com/shorts/${V}?list=${UU}`, playlist(UU)],

  // Mixes, Watch later and Liked videos: one video.
  [`https://www.youtube.com/watch?v=${V}&list=RD${V}&start_radio=1`, single],
  [`https://www.youtube.com/watch?v=${V}&list=RDMM${V}`, single],
  [`https://www.youtube.com/watch?v=${V}&list=RDMM`, single],
  [`https://music.youtube.com/watch?v=${V}&list=RDAMVM${V}`, single],
  [`https://www.youtube.com/watch?v=${V}&list=RDCLAK5uy_kmPRjHDECIcuVwnKsx2Ng7fyNgFKWNJFs`, single],
  [`https://www.youtube.com/watch?v=${V}&list=WL&index=3`, single],
  [`https://www.youtube.com/watch?v=${V}&list=LL`, single],
  [`https://www.youtube.com/watch?v=${V}&list=LLuAXFkgsw1L7xaCfnd5JJOw`, single],
  [`https://www.youtube.com/playlist?list=WL`, single],
  // Not genuine ids: other kinds of list, wrong case, too short, other characters.
  [`https://www.youtube.com/watch?v=${V}&list=FLuAXFkgsw1L7xaCfnd5JJOw`, single],
  [`https://www.youtube.com/watch?v=${V}&list=pl${PL.slice(2)}`, single],
  [`https://www.youtube.com/watch?v=${V}&list=PLshort`, single],
  [`https://www.youtube.com/watch?v=${V}&list=PL%3Cscript%3E0123456789`, single],
  [`https://www.youtube.com/watch?v=${V}&list=`, single],
  [`https://www.youtube.com/watch?v=${V}&playlist=${PL}`, single],
  // Plain videos and other pages.
  [`https://www.youtube.com/watch?v=${V}`, single],
  [`https://youtu.be/${V}`, single],
  ['https://www.youtube.com/@SomeChannel/videos', single],
  // Other sites, look-alikes and non-URLs.
  [`https://example.com/playlist?list=${PL}`, single],
  [`https://invidious.example.org/playlist?list=${PL}`, single],
  [`https://www.youtube.com.evil.example/playlist?list=${PL}`, single],
  [`ftp://www.youtube.com/playlist?list=${PL}`, single],
  [`ytsearch:${PL}`, single],
  ['not a url', single],

  // Podcast shows, with or without country and slug.
  ['https://podcasts.apple.com/us/podcast/the-daily/id1200361736', show('1200361736')],
  ['https://podcasts.apple.com/podcast/the-daily/id1200361736', show('1200361736')],
  ['https://podcasts.apple.com/us/podcast/id1200361736', show('1200361736')],
  ['https://podcasts.apple.com/podcast/id1200361736', show('1200361736')],
  ['https://podcasts.apple.com/gb/podcast/the-rest-is-history/id1537788786?uo=4', show('1537788786')],
  ['https://podcasts.apple.com/us/podcast/the-daily/id1200361736/', show('1200361736')],
  ['https://podcasts.apple.com/us/podcast/the-daily/id1200361736?see-all=episodes&l=es', show('1200361736')],
  ['https://Podcasts.Apple.com/US/Podcast/The-Daily/ID1200361736', show('1200361736')],
  ['https://itunes.apple.com/us/podcast/the-daily/id1200361736?mt=2', show('1200361736')],
  ['https://podcasts.apple.com/id/podcast/some-show/id123456789', show('123456789')],
  ['https://podcasts.apple.com/jp/podcast/%E6%97%A5%E6%9C%AC%E3%81%AE%E7%95%AA%E7%B5%84/id1449361221', show('1449361221')],
  ['http://podcasts.apple.com/us/podcast/the-daily/id1200361736', show('1200361736')],
  // An episode link names one episode; channels, other stores and broken ids are no show.
  ['https://podcasts.apple.com/us/podcast/the-daily/id1200361736?i=1000654321987', single],
  ['https://podcasts.apple.com/us/podcast/a-title/id1200361736?i=1000654321987&uo=4', single],
  ['https://podcasts.apple.com/us/channel/the-new-york-times/id6442463980', single],
  ['https://podcasts.apple.com/us/podcast/the-daily', single],
  ['https://podcasts.apple.com/us/podcast/the-daily/id', single],
  ['https://podcasts.apple.com/us/podcast/the-daily/idabc', single],
  ['https://podcasts.apple.com/us/podcast/the-daily/extra/id1200361736', single],
  ['https://podcasts.apple.com.evil.example/us/podcast/x/id1200361736', single],
  ['https://music.apple.com/us/album/some-album/id1440857781', single],
];

describe('batches: detection of shows and genuine playlists (rule 8)', () => {
  for (const [url, expected] of CASES) {
    it(`${url} → ${expected.kind}`, () => {
      expect(detectBatchSource(url)).to.deep.equal(expected);
    });
  }
});
