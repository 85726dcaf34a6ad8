// A podcast show's episodes from its RSS 2.0 feed, read with a real XML
// parser (fast-xml-parser, validating: a truncated or malformed document is
// an error, never a partial list). Pure: fetching the feed is show.ts's.
//
// What an episode is: an `<item>` with an http(s) `<enclosure url>`, the
// media file the episode job downloads. Items without one (announcements,
// trailers published as text) are not episodes and are left out.
// Order: the feed's own. Publishers list episodic shows newest first and
// serial shows (`itunes:type` serial) in the order they are meant to be
// heard; either way the feed is the order the show's apps present.
//
// Fields per episode:
//   url          enclosure@url
//   title        <title>, else <itunes:title>, else the enclosure's file name
//   description  <description> (CDATA or escaped HTML, as published), else <itunes:summary>
//   releaseDate  <pubDate> as an exact ISO 8601 instant (release-date.ts)
//   imageUrl     the episode's <itunes:image href>, else the show's
//                (<itunes:image href>, else <image><url>): the thumbnail
//                artwork of a show episode (spec rule 6)
//
// The iTunes namespace is found by its URI, so a feed binding it to another
// prefix than `itunes:` is read the same.
import { XMLParser } from 'fast-xml-parser';
import { parseHttpUrl } from '../media-info/platform-url.js';
import { releaseDateOfPubDate } from './release-date.js';

export interface ShowEpisode {
  /** The enclosure URL: what the episode job downloads. */
  url: string;
  title: string;
  description?: string;
  /** ISO 8601 instant, e.g. `2024-01-02T10:00:00.000Z`. */
  releaseDate?: string;
  /** Episode artwork, else the show's; absent when the feed has none. */
  imageUrl?: string;
}

export interface ShowFeed {
  title?: string;
  imageUrl?: string;
  episodes: ShowEpisode[];
}

export class FeedParseError extends Error {
  constructor(readonly reason: 'malformed' | 'not_rss') {
    super(reason === 'malformed' ? 'feed is not well-formed XML' : 'document is not an RSS feed');
    this.name = 'FeedParseError';
  }
}

const ITUNES_NAMESPACES = new Set(['http://www.itunes.com/dtds/podcast-1.0.dtd', 'https://www.itunes.com/dtds/podcast-1.0.dtd']);

type Node = Record<string, unknown>;

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  // Titles like "1984" stay strings; nothing is guessed into numbers.
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  // Numeric character references (&#8217;) are XML, but the parser decodes
  // them only with its HTML entities, which also forgive the &nbsp; and
  // &eacute; feeds use without declaring them.
  htmlEntities: true,
  isArray: (_name, jpath) => jpath === 'rss.channel.item',
});

/** The text of an element as the parser gives it: a string, `{#text}` when it has attributes, the first of repeats. */
function text(value: unknown): string | undefined {
  const first = Array.isArray(value) ? (value as unknown[])[0] : value;
  const raw = typeof first === 'string' ? first : typeof first === 'object' && first !== null ? (first as Node)['#text'] : undefined;
  const trimmed = typeof raw === 'string' ? raw.trim() : undefined;
  return trimmed ? trimmed : undefined;
}

/** An attribute of an element (the first of repeats). */
function attr(value: unknown, name: string): string | undefined {
  const first = Array.isArray(value) ? (value as unknown[])[0] : value;
  return typeof first === 'object' && first !== null ? text((first as Node)[`@_${name}`]) : undefined;
}

function httpUrl(raw: string | undefined): string | undefined {
  return raw === undefined ? undefined : parseHttpUrl(raw)?.href;
}

/** Every prefix bound to the iTunes namespace on `<rss>` or `<channel>`, and `itunes` itself. */
function itunesPrefixes(...elements: Node[]): string[] {
  const prefixes = new Set(['itunes']);
  for (const el of elements) {
    for (const [key, value] of Object.entries(el)) {
      if (key.startsWith('@_xmlns:') && typeof value === 'string' && ITUNES_NAMESPACES.has(value.trim())) prefixes.add(key.slice(8));
    }
  }
  return [...prefixes];
}

function fileName(url: string): string {
  const last = new URL(url).pathname.split('/').filter(Boolean).at(-1) ?? url;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

function episodeOf(item: Node, itunes: (el: Node, name: string) => unknown, showImage: string | undefined): ShowEpisode | undefined {
  const enclosures = Array.isArray(item.enclosure) ? (item.enclosure as unknown[]) : [item.enclosure];
  const url = enclosures.map((e) => httpUrl(attr(e, 'url'))).find((u) => u !== undefined);
  if (!url) return undefined;
  const description = text(item.description) ?? text(itunes(item, 'summary'));
  const releaseDate = releaseDateOfPubDate(text(item.pubDate));
  const imageUrl = httpUrl(attr(itunes(item, 'image'), 'href')) ?? showImage;
  return {
    url,
    title: text(item.title) ?? text(itunes(item, 'title')) ?? fileName(url),
    ...(description !== undefined && { description }),
    ...(releaseDate !== undefined && { releaseDate }),
    ...(imageUrl !== undefined && { imageUrl }),
  };
}

/**
 * The text of an XML document's bytes: a byte-order mark decides, else the
 * encoding its declaration names (`<?xml version="1.0" encoding="ISO-8859-1"?>`,
 * read from the declaration only), else UTF-8. An encoding TextDecoder does
 * not know is read as UTF-8.
 */
export function decodeXml(bytes: Uint8Array): string {
  const [a, b] = bytes;
  if (a === 0xff && b === 0xfe) return new TextDecoder('utf-16le').decode(bytes);
  if (a === 0xfe && b === 0xff) return new TextDecoder('utf-16be').decode(bytes);
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 200));
  const end = head.indexOf('?>');
  const declaration = head.startsWith('<?xml') && end !== -1 ? head.slice(0, end) : '';
  const declared = /\sencoding\s*=\s*["']([A-Za-z0-9._-]+)["']/.exec(declaration)?.[1];
  try {
    return new TextDecoder(declared ?? 'utf-8').decode(bytes);
  } catch {
    return new TextDecoder('utf-8').decode(bytes);
  }
}

/** Parse an RSS feed; throws FeedParseError when it is not well-formed XML or not RSS. */
export function parseShowFeed(xml: string): ShowFeed {
  let doc: Node;
  try {
    doc = parser.parse(xml, true) as Node;
  } catch {
    throw new FeedParseError('malformed');
  }
  const rss = doc.rss;
  const channel = typeof rss === 'object' && rss !== null ? (rss as Node).channel : undefined;
  if (typeof channel !== 'object' || channel === null || Array.isArray(channel)) throw new FeedParseError('not_rss');
  const ch = channel as Node;
  const prefixes = itunesPrefixes(rss as Node, ch);
  const itunes = (el: Node, name: string) => prefixes.map((p) => el[`${p}:${name}`]).find((v) => v !== undefined);
  const imageUrl = httpUrl(attr(itunes(ch, 'image'), 'href')) ?? httpUrl(text((ch.image as Node | undefined)?.url));
  const items = Array.isArray(ch.item) ? (ch.item as unknown[]) : [];
  const episodes = items
    .filter((i): i is Node => typeof i === 'object' && i !== null)
    .map((i) => episodeOf(i, itunes, imageUrl))
    .filter((e): e is ShowEpisode => e !== undefined);
  const title = text(ch.title);
  return { ...(title !== undefined && { title }), ...(imageUrl !== undefined && { imageUrl }), episodes };
}
