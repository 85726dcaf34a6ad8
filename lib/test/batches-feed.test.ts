// A show's episodes as the feed publishes them: exact fields, feed order,
// artwork falling back to the show's, items without media left out, dates as
// exact instants, and documents that are not RSS refused rather than half read.
import { expect } from 'chai';
import { decodeXml, FeedParseError, parseShowFeed } from '../src/batches/feed.js';
import { releaseDateOfPubDate } from '../src/batches/release-date.js';
import { feedUrlOfLookup, lookupUrl } from '../src/batches/show.js';
import { BatchSourceError } from '../src/batches/errors.js';
import { EXAMPLE_FEED, FEED_MEDIA as MEDIA, SHOW_ART } from './batches-fixtures.js';
import { buildFeed, lookupResult } from './batches-support.js';

describe('batches: podcast feeds', () => {
  it('episodes in feed order with exact fields; artwork falls back to the show; text-only items left out', () => {
    expect(parseShowFeed(EXAMPLE_FEED)).to.deep.equal({
      title: 'The Example Show & Friends',
      imageUrl: SHOW_ART,
      episodes: [
        {
          url: `${MEDIA}/ep3.mp3?source=rss&id=3`,
          title: 'Ep. 3: <Tags> & "quotes"',
          description: '<p>Show notes with <a href="https://example.org/?a=1&b=2">a link</a> &amp; an entity.</p>',
          releaseDate: '2024-03-05T14:30:00.000Z',
          imageUrl: 'https://img.example.org/ep3.jpg',
        },
        {
          url: `${MEDIA}/ep2.m4a`,
          title: 'Ep. 2 without its own artwork',
          description: 'Second episode.',
          releaseDate: '2024-03-01T06:00:00.000Z',
          imageUrl: SHOW_ART,
        },
        {
          url: `${MEDIA}/ep1.mp4`,
          title: '1984',
          description: '<![CDATA-looking text]> in the notes',
          releaseDate: '2024-03-01T07:15:00.000Z',
          imageUrl: 'https://img.example.org/ep1.png',
        },
      ],
    });
  });

  it('reads the iTunes namespace under whatever prefix the feed binds it to', () => {
    const feed = buildFeed({
      title: 'Aliased',
      image: SHOW_ART,
      itunesPrefix: 'podcast',
      items: [{ enclosure: { url: `${MEDIA}/a.mp3` }, title: 'A', image: 'https://img.example.org/a.jpg' }],
    });
    expect(feed).to.contain('<podcast:image href="https://img.example.org/a.jpg"/>');
    expect(parseShowFeed(feed).episodes).to.deep.equal([{ url: `${MEDIA}/a.mp3`, title: 'A', imageUrl: 'https://img.example.org/a.jpg' }]);
  });

  it('without a show image and without a title: no artwork, the enclosure file name as title', () => {
    const feed = buildFeed({ title: 'Bare', items: [{ enclosure: { url: `${MEDIA}/My%20Episode.mp3` } }] });
    expect(parseShowFeed(feed)).to.deep.equal({ title: 'Bare', episodes: [{ url: `${MEDIA}/My%20Episode.mp3`, title: 'My Episode.mp3' }] });
  });

  it('an enclosure that is not http(s) is no episode; itunes:summary stands in for a missing description', () => {
    const xml = `<?xml version="1.0"?><rss version="2.0" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd"><channel><title>S</title>
      <item><title>ftp</title><enclosure url="ftp://example.org/a.mp3" type="audio/mpeg" length="1"/></item>
      <item><title>ok</title><itunes:summary>Summary text</itunes:summary><enclosure url="https://example.org/b.mp3" type="audio/mpeg" length="1"/></item>
    </channel></rss>`;
    expect(parseShowFeed(xml).episodes).to.deep.equal([{ url: 'https://example.org/b.mp3', title: 'ok', description: 'Summary text' }]);
  });

  const refused: [string, string, FeedParseError['reason']][] = [
    ['an HTML page', '<!DOCTYPE html><html><head><title>Show</title></head><body><p>Listen<br></body></html>', 'malformed'],
    ['well-formed XHTML', '<html><body><p>Listen</p></body></html>', 'not_rss'],
    ['an Atom feed', '<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>x</title></feed>', 'not_rss'],
    ['a truncated feed (cut inside an item)', EXAMPLE_FEED.slice(0, EXAMPLE_FEED.indexOf('Ep. 2') + 10), 'malformed'],
    ['a truncated feed (closing tags missing)', EXAMPLE_FEED.replace('</channel>\n</rss>', ''), 'malformed'],
    ['JSON', '{"items": []}', 'malformed'],
    ['an empty body', '', 'malformed'],
  ];
  for (const [what, body, reason] of refused) {
    it(`refuses ${what}`, () => {
      expect(() => parseShowFeed(body)).to.throw(FeedParseError).with.property('reason', reason);
    });
  }

  it('decodes the encoding the XML declaration names, and UTF-16 by its byte-order mark', () => {
    const latin1 = Buffer.from('<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel><title>Caf\xe9</title>'
      + '<item><title>\xc9pisode</title><enclosure url="https://example.org/e.mp3" type="audio/mpeg" length="1"/></item></channel></rss>', 'latin1');
    expect(parseShowFeed(decodeXml(latin1))).to.deep.include({ title: 'Café', episodes: [{ url: 'https://example.org/e.mp3', title: 'Épisode' }] });
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('<rss version="2.0"><channel><title>Ünïcode</title></channel></rss>', 'utf16le')]);
    expect(parseShowFeed(decodeXml(utf16)).title).to.equal('Ünïcode');
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('<rss version="2.0"><channel><title>Ça</title></channel></rss>')]);
    expect(parseShowFeed(decodeXml(bom)).title).to.equal('Ça');
  });
});

describe('batches: release dates from pubDate', () => {
  const CASES: [string | undefined, string | undefined][] = [
    ['Tue, 02 Jan 2024 10:00:00 GMT', '2024-01-02T10:00:00.000Z'],
    ['Tue, 02 Jan 2024 10:00:00 +0000', '2024-01-02T10:00:00.000Z'],
    ['Tue, 02 Jan 2024 10:00:00 -0500', '2024-01-02T15:00:00.000Z'],
    ['Tue, 02 Jan 2024 10:00:00 +05:30', '2024-01-02T04:30:00.000Z'],
    ['Tue, 02 Jan 2024 10:00:00 EST', '2024-01-02T15:00:00.000Z'],
    ['Tue, 02 Jul 2024 10:00:00 PDT', '2024-07-02T17:00:00.000Z'],
    ['Tue, 2 Jan 2024 10:00 GMT', '2024-01-02T10:00:00.000Z'],
    ['2 Jan 2024 10:00:00 GMT', '2024-01-02T10:00:00.000Z'],
    ['Tuesday, 02 January 2024 10:00:00 GMT', '2024-01-02T10:00:00.000Z'],
    ['Tue, 02 Jan 24 10:00:00 GMT', '2024-01-02T10:00:00.000Z'],
    // No zone: read as UTC, wherever the gateway runs.
    ['Tue, 02 Jan 2024 10:00:00', '2024-01-02T10:00:00.000Z'],
    ['Thu, 29 Feb 2024 23:59:59 UT', '2024-02-29T23:59:59.000Z'],
    ['  Tue, 02 Jan 2024 10:00:00 GMT  ', '2024-01-02T10:00:00.000Z'],
    // ISO 8601, as some feeds write it.
    ['2024-01-02T10:00:00Z', '2024-01-02T10:00:00.000Z'],
    ['2024-01-02T10:00:00+02:00', '2024-01-02T08:00:00.000Z'],
    ['2024-01-02', '2024-01-02T00:00:00.000Z'],
    // Not dates.
    ['Fri, 30 Feb 2024 10:00:00 GMT', undefined],
    ['Tue, 02 Foo 2024 10:00:00 GMT', undefined],
    ['Tue, 02 Jan 2024 25:00:00 GMT', undefined],
    ['Tue, 02 Jan 2024 10:00:00 XYZ', undefined],
    ['yesterday', undefined],
    ['', undefined],
    [undefined, undefined],
  ];
  for (const [input, expected] of CASES) {
    it(`${JSON.stringify(input)} → ${expected ?? 'none'}`, () => {
      expect(releaseDateOfPubDate(input)).to.equal(expected);
    });
  }
});

describe('batches: the lookup API answer', () => {
  it('is asked as the real API is: ?id=<digits>&entity=podcast', () => {
    expect(lookupUrl('https://itunes.apple.com/lookup', '1200361736')).to.equal('https://itunes.apple.com/lookup?id=1200361736&entity=podcast');
    expect(lookupUrl('http://127.0.0.1:9/v1/lookup?country=us', '42')).to.equal('http://127.0.0.1:9/v1/lookup?country=us&id=42&entity=podcast');
  });

  it('reads results[0].feedUrl', () => {
    const body = `\n\n\n${JSON.stringify({ resultCount: 1, results: [lookupResult('42', 'https://feeds.example.org/show.xml')] })}`;
    expect(feedUrlOfLookup(body)).to.equal('https://feeds.example.org/show.xml');
  });

  const failures: [string, string, string][] = [
    ['no results', JSON.stringify({ resultCount: 0, results: [] }), 'show_not_found'],
    ['an item of another kind', JSON.stringify({ resultCount: 1, results: [{ wrapperType: 'collection', kind: 'album', collectionId: 1 }] }), 'show_not_found'],
    ['a show without a feed', JSON.stringify({ resultCount: 1, results: [lookupResult('42', undefined)] }), 'show_without_feed'],
    ['a feed that is not http(s)', JSON.stringify({ resultCount: 1, results: [lookupResult('42', 'file:///etc/passwd')] }), 'show_without_feed'],
    ['not JSON', '<html>busy</html>', 'lookup_failed'],
    ['JSON without results', '{"errorMessage":"Invalid value(s) for key(s): [id]"}', 'lookup_failed'],
  ];
  for (const [what, body, code] of failures) {
    it(`${what} → ${code}`, () => {
      expect(() => feedUrlOfLookup(body)).to.throw(BatchSourceError).with.property('code', code);
    });
  }
});
