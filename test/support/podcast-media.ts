// A podcast's media for the batch end-to-end tests, made with ffmpeg and
// served on loopback by the test media server: short AAC episodes (what a
// feed's enclosures point at) and artwork, a JPEG for the show and a PNG for
// one episode (the runner stores every thumbnail as JPEG).
import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cachedFixture } from './fixture-cache.js';
import { startMediaServer, type MediaServer } from './media.js';

const run = promisify(execFile);

export const PODCAST_MEDIA = {
  durationSeconds: 2,
  /** Episode files under `episodes/`, each a tone of its own frequency. */
  episodes: ['ep1.m4a', 'ep2.m4a', 'ep3.m4a', 'ep4.m4a'],
  showArt: 'art/show.jpg',
  episodeArt: 'art/episode.png',
} as const;

export interface PodcastMediaServer {
  baseUrl: string;
  /** The URL of `episodes/<name>`. */
  episodeUrl(name: (typeof PODCAST_MEDIA.episodes)[number]): string;
  showArtUrl: string;
  episodeArtUrl: string;
  /** A URL on this server that answers 404. */
  notFoundUrl: string;
  /** The path of every request so far. */
  readonly paths: readonly string[];
  stop(): Promise<void>;
}

async function ffmpeg(args: string[]): Promise<void> {
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', ...args], { maxBuffer: 1 << 20 });
}

let generated: Promise<string> | undefined;

function generate(): Promise<string> {
  generated ??= cachedFixture('podcast', import.meta.url, async (dir) => {
    await mkdir(join(dir, 'episodes'));
    await mkdir(join(dir, 'art'));
    const d = PODCAST_MEDIA.durationSeconds;
    await Promise.all([
      ...PODCAST_MEDIA.episodes.map((name, i) => ffmpeg([
        '-f', 'lavfi', '-i', `sine=frequency=${300 + 100 * i}:sample_rate=44100:duration=${d}`,
        '-c:a', 'aac', '-b:a', '64k', '-movflags', '+faststart', join(dir, 'episodes', name),
      ])),
      ffmpeg(['-f', 'lavfi', '-i', 'testsrc=size=300x300:rate=1:duration=1', '-frames:v', '1', join(dir, PODCAST_MEDIA.showArt)]),
      ffmpeg(['-f', 'lavfi', '-i', 'testsrc2=size=200x200:rate=1:duration=1', '-frames:v', '1', join(dir, PODCAST_MEDIA.episodeArt)]),
    ]);
  }).catch((err: unknown) => {
    generated = undefined;
    throw err;
  });
  return generated;
}

export async function startPodcastMediaServer(): Promise<PodcastMediaServer> {
  const server: MediaServer = await startMediaServer({ root: await generate() });
  return {
    baseUrl: server.baseUrl,
    episodeUrl: (name) => `${server.baseUrl}/episodes/${name}`,
    showArtUrl: `${server.baseUrl}/${PODCAST_MEDIA.showArt}`,
    episodeArtUrl: `${server.baseUrl}/${PODCAST_MEDIA.episodeArt}`,
    notFoundUrl: `${server.baseUrl}/episodes/missing.m4a`,
    get paths() {
      return server.paths;
    },
    stop: () => server.stop(),
  };
}
