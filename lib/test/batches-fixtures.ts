// A realistic podcast feed shared by the batch-source tests: CDATA show
// notes with HTML, escaped titles, enclosures with query strings, per-episode
// artwork on some episodes only, a text-only item, and pubDates in several zones.
import { buildFeed } from './batches-support.js';

export const FEED_MEDIA = 'https://media.example.org/show';
export const SHOW_ART = 'https://img.example.org/show-3000.jpg';

export const EXAMPLE_FEED = buildFeed({
  title: 'The Example Show & Friends',
  image: SHOW_ART,
  items: [
    {
      title: 'Ep. 3: <Tags> & "quotes"',
      description: '<p>Show notes with <a href="https://example.org/?a=1&b=2">a link</a> &amp; an entity.</p>',
      pubDate: 'Tue, 05 Mar 2024 09:30:00 -0500',
      enclosure: { url: `${FEED_MEDIA}/ep3.mp3?source=rss&id=3`, type: 'audio/mpeg', length: 31_457_280 },
      image: 'https://img.example.org/ep3.jpg',
      guid: 'ep-3',
    },
    {
      title: 'A text-only announcement',
      description: 'No media here.',
      pubDate: 'Mon, 04 Mar 2024 12:00:00 GMT',
      link: 'https://example.org/news',
    },
    {
      title: 'Ep. 2 without its own artwork',
      description: 'Second episode.',
      pubDate: 'Fri, 01 Mar 2024 06:00:00 +0000',
      enclosure: { url: `${FEED_MEDIA}/ep2.m4a`, type: 'audio/x-m4a' },
      guid: 'ep-2',
    },
    {
      title: '1984',
      description: '<![CDATA-looking text]> in the notes',
      pubDate: 'Thu, 29 Feb 2024 23:15:00 PST',
      enclosure: { url: `${FEED_MEDIA}/ep1.mp4`, type: 'video/mp4' },
      image: 'https://img.example.org/ep1.png',
    },
  ],
});
