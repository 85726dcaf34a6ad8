// The two batch settings: their defaults, what is refused at start (naming
// the variable, never echoing the value), and how they reach BatchSources.
import { expect } from 'chai';
import { z } from 'zod';
import { batchSourcesOptions, batchSourcesSchema } from '../src/batches/index.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { mediaInfoOptions, mediaInfoSchema } from '../src/media-info/config.js';
import { OutboundPolicy } from '../src/outbound.js';

describe('batches: settings', () => {
  it('defaults: the platform\'s lookup API and 500 entries', () => {
    expect(loadConfig(batchSourcesSchema, {})).to.deep.equal({ PODCAST_LOOKUP_ENDPOINT: 'https://itunes.apple.com/lookup', MAX_PLAYLIST_SIZE: 500 });
  });

  it('takes a fake lookup API and another limit', () => {
    expect(loadConfig(batchSourcesSchema, { PODCAST_LOOKUP_ENDPOINT: 'http://127.0.0.1:8099/lookup', MAX_PLAYLIST_SIZE: '50' }))
      .to.deep.equal({ PODCAST_LOOKUP_ENDPOINT: 'http://127.0.0.1:8099/lookup', MAX_PLAYLIST_SIZE: 50 });
  });

  const refused: [Record<string, string>, string][] = [
    [{ PODCAST_LOOKUP_ENDPOINT: 'ftp://lookup.example/x' }, 'PODCAST_LOOKUP_ENDPOINT: must be an http(s) URL without credentials'],
    [{ PODCAST_LOOKUP_ENDPOINT: 'https://user:s3cret@lookup.example/x' }, 'PODCAST_LOOKUP_ENDPOINT: must be an http(s) URL without credentials'],
    [{ MAX_PLAYLIST_SIZE: '0' }, 'MAX_PLAYLIST_SIZE'],
    [{ MAX_PLAYLIST_SIZE: 'many' }, 'MAX_PLAYLIST_SIZE'],
  ];
  for (const [env, message] of refused) {
    it(`refuses ${JSON.stringify(env)}`, () => {
      expect(() => loadConfig(batchSourcesSchema, env)).to.throw(ConfigError, message).and.satisfy((e: Error) => !e.message.includes('s3cret'));
    });
  }

  it('merged with the metadata settings, the options carry both and the gateway\'s policy', () => {
    const config = loadConfig(z.object({ ...mediaInfoSchema.shape, ...batchSourcesSchema.shape }), {
      MAX_PLAYLIST_SIZE: '7', MEDIA_INFO_YTDLP: 'python3 -m yt_dlp', MEDIA_INFO_URL_MAP: '{"https://www.youtube.com/playlist?list=PLx":"http://127.0.0.1:1/p.rss"}',
    });
    const policy = new OutboundPolicy();
    const options = batchSourcesOptions(config, mediaInfoOptions(config), policy);
    expect(options).to.include({ lookupEndpoint: 'https://itunes.apple.com/lookup', maxEntries: 7, policy });
    expect(options.mediaInfo.command).to.deep.equal(['python3', '-m', 'yt_dlp']);
    expect(options.mediaInfo.urlMap?.get('https://www.youtube.com/playlist?list=PLx')).to.equal('http://127.0.0.1:1/p.rss');
  });
});
