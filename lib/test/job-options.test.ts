// POST /jobs body validation and normalisation, table-driven: every field's
// type and bounds, rules 1–2, clip times, the silent mp4 fallback, the
// defaults and the rule-4 codec corrections.
import { expect } from 'chai';
import { FILENAME_BYTES_PROBLEM, QUALITY_PRESET_CRF, normaliseSpecOptions, parseClipTime, parseJobRequest, type JobRequest } from '../src/job-options.js';
import type { MediaJobSpecOptions, MediaJobSpecOptionsInput } from '../src/mediajob/types.js';

const URL_OK = 'https://media.example/watch?v=abc';

function ok(body: Record<string, unknown>): JobRequest {
  const r = parseJobRequest({ url: URL_OK, ...body });
  if (!r.ok) throw new Error(`expected ${JSON.stringify(body)} to be accepted, got: ${r.error}`);
  return r.request;
}

function err(body: unknown): string {
  const r = parseJobRequest(body);
  if (r.ok) throw new Error(`expected ${JSON.stringify(body)} to be refused`);
  return r.error;
}

describe('job options (POST /jobs body)', () => {
  describe('defaults', () => {
    it('fills every default for a body with only url', () => {
      expect(ok({})).to.deep.equal({
        options: {
          url: URL_OK, format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
          audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false,
          waitForVideo: false, enableProgressWebhook: false,
        },
        paused: false,
      });
    });
    it('leaves audio_codec absent (copy with fallback) when neither codec nor bitrate is given', () => {
      expect(ok({}).options).not.to.have.property('audioCodec');
    });
    it('defaults the format to m4a when audio_only', () => {
      expect(ok({ audio_only: true }).options.format).to.equal('m4a');
    });
    it('treats null as not given', () => {
      expect(ok({ format: null, video_quality: null, filename: null, audio_only: null }).options).to.include({ format: 'mp4', videoQuality: 23, audioOnly: false });
    });
    it('ignores unknown fields', () => {
      expect(ok({ colour: 'blue', nested: { a: 1 } }).options).not.to.have.property('colour');
    });
  });

  describe('refuses a body that is not an object', () => {
    for (const body of [null, [], 'x', 5, true]) {
      it(JSON.stringify(body), () => expect(err(body)).to.equal('Request body must be a JSON object'));
    }
  });

  describe('field errors name the field', () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['url missing', { url: undefined }, "Missing required field 'url'"],
      ['url null', { url: null }, "Missing required field 'url'"],
      ['url a number', { url: 5 }, "Invalid field 'url': must be a string"],
      ['url empty', { url: '  ' }, "Invalid field 'url': must not be empty"],
      ['url not a URL', { url: 'not a url' }, "Invalid field 'url': must be an absolute http or https URL"],
      ['url ftp', { url: 'ftp://media.example/x' }, "Invalid field 'url': must be an absolute http or https URL"],
      ['url too long', { url: `https://e.example/${'a'.repeat(5000)}` }, "Invalid field 'url': must be at most 4096 characters"],
      ['format a number', { format: 4 }, "Invalid field 'format': must be a string"],
      ['format an object', { format: {} }, "Invalid field 'format': must be a string"],
      ['video_codec unknown', { video_codec: 'av1' }, "Invalid field 'video_codec': must be one of 'copy', 'h264', 'h265', 'vp9'"],
      ['video_codec a number', { video_codec: 264 }, "Invalid field 'video_codec': must be one of 'copy', 'h264', 'h265', 'vp9'"],
      ['audio_codec unknown', { audio_codec: 'flac' }, "Invalid field 'audio_codec': must be one of 'copy', 'aac', 'opus', 'mp3'"],
      ['audio_bitrate unknown', { audio_bitrate: '100k' }, "Invalid field 'audio_bitrate': must be one of '64k', '128k', '192k', '256k', '320k'"],
      ['audio_bitrate a number', { audio_bitrate: 128 }, "Invalid field 'audio_bitrate': must be one of '64k', '128k', '192k', '256k', '320k'"],
      ['video_quality 52', { video_quality: 52 }, "Invalid field 'video_quality': must be an integer from 0 to 51"],
      ['video_quality -1', { video_quality: -1 }, "Invalid field 'video_quality': must be an integer from 0 to 51"],
      ['video_quality 2.5', { video_quality: 2.5 }, "Invalid field 'video_quality': must be an integer from 0 to 51"],
      ['video_quality a string', { video_quality: '23' }, "Invalid field 'video_quality': must be an integer from 0 to 51"],
      ['quality_preset unknown', { quality_preset: 'ultra' }, "Invalid field 'quality_preset': must be one of 'highest', 'high', 'medium', 'low', 'lowest'"],
      ['max_resolution unknown', { max_resolution: '4k' }, "Invalid field 'max_resolution': must be one of 'best', 'lowest', '2160', '1440', '1080', '720', '480', '360', '240', '144'"],
      ['max_resolution 1000', { max_resolution: 1000 }, "Invalid field 'max_resolution': must be one of 'best', 'lowest', '2160', '1440', '1080', '720', '480', '360', '240', '144'"],
      ['max_resolution a boolean', { max_resolution: true }, "Invalid field 'max_resolution': must be one of 'best', 'lowest', '2160', '1440', '1080', '720', '480', '360', '240', '144'"],
      ['webhook_url not a URL', { webhook_url: 'hook' }, "Invalid field 'webhook_url': must be an absolute http or https URL"],
      ['webhook_url a number', { webhook_url: 1 }, "Invalid field 'webhook_url': must be a string"],
      ['max_duration 0', { max_duration: 0 }, "Invalid field 'max_duration': must be an integer number of seconds from 1 to 2147483647"],
      ['max_duration 1.5', { max_duration: 1.5 }, "Invalid field 'max_duration': must be an integer number of seconds from 1 to 2147483647"],
      ['max_duration too big', { max_duration: 2 ** 31 }, "Invalid field 'max_duration': must be an integer number of seconds from 1 to 2147483647"],
      ['max_duration a string', { max_duration: '60' }, "Invalid field 'max_duration': must be an integer number of seconds from 1 to 2147483647"],
      ['storage a string', { storage: 's3' }, "Invalid field 'storage': must be an object"],
      ['storage an array', { storage: [] }, "Invalid field 'storage': must be an object"],
      ['storage_provider unknown', { storage_provider: 'ftp' }, "Invalid field 'storage_provider': must be one of 's3', 'blob', 'gcs', 'oss', 'drive'"],
    ];
    for (const field of ['audio_only', 'download_subtitles', 'download_thumbnail', 'live_recording', 'live_from_start', 'wait_for_video', 'enable_progress_webhook', 'paused']) {
      cases.push([`${field} a string`, { [field]: 'true' }, `Invalid field '${field}': must be a boolean (true or false)`]);
      cases.push([`${field} a number`, { [field]: 1 }, `Invalid field '${field}': must be a boolean (true or false)`]);
    }
    for (const [name, body, message] of cases) {
      it(name, () => expect(err({ url: URL_OK, ...body })).to.equal(message));
    }
    it('reports the first bad field in the order of the spec table', () => {
      expect(err({ url: URL_OK, folder: '/abs', video_quality: 99 })).to.equal("Invalid field 'video_quality': must be an integer from 0 to 51");
    });
  });

  describe('enum values are all accepted', () => {
    it('every video_codec, audio_codec, audio_bitrate, quality_preset, max_resolution and storage_provider', () => {
      for (const v of ['copy', 'h264', 'h265', 'vp9']) expect(ok({ video_codec: v }).options.videoCodec).to.equal(v);
      for (const v of ['copy', 'aac', 'opus', 'mp3']) expect(ok({ audio_codec: v }).options.audioCodec).to.equal(v);
      for (const v of ['64k', '128k', '192k', '256k', '320k']) expect(ok({ audio_bitrate: v }).options.audioBitrate).to.equal(v);
      for (const v of ['best', 'lowest', '2160', '1440', '1080', '720', '480', '360', '240', '144']) expect(ok({ max_resolution: v }).options.maxResolution).to.equal(v);
      for (const v of ['s3', 'blob', 'gcs', 'oss', 'drive']) expect(ok({ storage_provider: v }).storageProvider).to.equal(v);
    });
    it('max_resolution as a number', () => expect(ok({ max_resolution: 720 }).options.maxResolution).to.equal('720'));
    it('video_quality bounds 0 and 51', () => {
      expect(ok({ video_quality: 0 }).options.videoQuality).to.equal(0);
      expect(ok({ video_quality: 51 }).options.videoQuality).to.equal(51);
    });
    it('booleans and the rest carry through', () => {
      const o = ok({
        audio_only: true, download_subtitles: true, download_thumbnail: true, live_recording: true, live_from_start: true,
        wait_for_video: true, enable_progress_webhook: true, max_duration: 3600, paused: true, webhook_url: 'https://hooks.example/x?t=1',
      });
      expect(o.options).to.include({
        audioOnly: true, downloadSubtitles: true, downloadThumbnail: true, liveRecording: true, liveFromStart: true,
        waitForVideo: true, enableProgressWebhook: true, maxDuration: 3600,
      });
      expect(o.paused).to.equal(true);
      expect(o.webhookUrl).to.equal('https://hooks.example/x?t=1');
      expect(o.options).not.to.have.property('webhookUrl');
    });
  });

  describe('format: silent mp4 fallback', () => {
    const cases: [unknown, string][] = [
      ['mp4', 'mp4'], ['mkv', 'mkv'], ['webm', 'webm'], ['mov', 'mov'], ['m4a', 'm4a'], ['mp3', 'mp3'], ['ogg', 'ogg'], ['opus', 'opus'],
      ['avi', 'mp4'], ['', 'mp4'], ['mp4 ', 'mp4'], ['MP3', 'mp3'], ['flac', 'mp4'],
    ];
    for (const [given, expected] of cases) {
      it(`${JSON.stringify(given)} → ${expected}`, () => expect(ok({ format: given }).options.format).to.equal(expected));
    }
    it('an invalid format with audio_only still becomes mp4 (the spec replaces it by mp4)', () => {
      expect(ok({ format: 'wav', audio_only: true }).options.format).to.equal('mp4');
    });
  });

  describe('rule 1: filename', () => {
    const bad: [string, unknown, string][] = [
      ['256 characters', 'a'.repeat(256), 'must be at most 255 characters'],
      ['197 bytes of ASCII', 'a'.repeat(197), FILENAME_BYTES_PROBLEM],
      ['99 two-byte letters (198 bytes)', 'é'.repeat(99), FILENAME_BYTES_PROBLEM],
      ['..', 'a..b', "must not contain '..'"],
      ['forward slash', 'a/b', 'must not contain a forward slash or a backslash'],
      ['backslash', 'a\\b', 'must not contain a forward slash or a backslash'],
      ['null byte', 'a\0b', 'must not contain a null byte'],
      ['empty', '', 'must not be empty'],
      ['whitespace', '   ', 'must not be empty'],
      ['a number', 5, 'must be a string'],
    ];
    for (const [name, value, message] of bad) {
      it(`refuses ${name}`, () => expect(err({ url: URL_OK, filename: value })).to.equal(`Invalid field 'filename': ${message}`));
    }
    for (const value of ['a'.repeat(196), 'é'.repeat(98), 'My video (1080p) – final', 'a.b.c', '.hidden', 'ünïcødé 名前']) {
      it(`accepts ${JSON.stringify(value.slice(0, 20))}`, () => expect(ok({ filename: value }).options.filename).to.equal(value));
    }
  });

  describe('rule 2: folder', () => {
    const bad: [string, unknown, string][] = [
      ['201 characters', 'a'.repeat(201), 'must be at most 200 characters'],
      ['..', 'a/../b', "must not contain '..'"],
      ['leading slash', '/a', 'must not start with a forward slash or a backslash'],
      ['leading backslash', '\\a', 'must not start with a forward slash or a backslash'],
      ['empty', '', 'must not be empty or whitespace-only'],
      ['whitespace-only', ' \t ', 'must not be empty or whitespace-only'],
      ['null byte', 'a\0', 'must not contain a null byte'],
      ['an array', ['a'], 'must be a string'],
    ];
    for (const [name, value, message] of bad) {
      it(`refuses ${name}`, () => expect(err({ url: URL_OK, folder: value })).to.equal(`Invalid field 'folder': ${message}`));
    }
    for (const value of ['a'.repeat(200), 'shows/2024/ep1', 'trailing/', 'a.b']) {
      it(`accepts ${JSON.stringify(value.slice(0, 20))}`, () => expect(ok({ folder: value }).options.folder).to.equal(value));
    }
  });

  describe('clip_start / clip_end', () => {
    const times: [string, number | undefined][] = [
      ['01:02:03', 3723], ['1:02:03', 3723], ['02:03', 123], ['90:00', 5400], ['123', 123], ['0', 0], ['12.5', 12.5],
      ['00:00:01.25', 1.25], ['100:00:00', 360000],
      ['1:60', undefined], ['1:60:00', undefined], ['00:00:60', undefined], ['abc', undefined], ['', undefined],
      ['-5', undefined], ['1:2:3:4', undefined], ['1:', undefined], [':30', undefined], ['1e3', undefined],
    ];
    for (const [text, seconds] of times) {
      it(`parseClipTime(${JSON.stringify(text)}) = ${seconds}`, () => expect(parseClipTime(text)).to.equal(seconds));
    }
    it('accepts valid start and end and keeps them as given (trimmed)', () => {
      expect(ok({ clip_start: ' 00:01:00', clip_end: '02:00' }).options).to.include({ clipStart: '00:01:00', clipEnd: '02:00' });
    });
    it('accepts seconds as a JSON number', () => {
      expect(ok({ clip_start: 10, clip_end: 20.5 }).options).to.include({ clipStart: '10', clipEnd: '20.5' });
    });
    it('accepts only a start', () => expect(ok({ clip_start: '5' }).options.clipStart).to.equal('5'));
    const bad: [Record<string, unknown>, string][] = [
      [{ clip_start: 'soon' }, "Invalid field 'clip_start': must be a time as 'HH:MM:SS', 'MM:SS' or seconds (e.g. '01:02:03', '02:03' or '123')"],
      [{ clip_end: '1:75' }, "Invalid field 'clip_end': must be a time as 'HH:MM:SS', 'MM:SS' or seconds (e.g. '01:02:03', '02:03' or '123')"],
      [{ clip_start: true }, "Invalid field 'clip_start': must be a time as 'HH:MM:SS', 'MM:SS' or seconds (e.g. '01:02:03', '02:03' or '123')"],
      [{ clip_start: '00:02:00', clip_end: '00:01:00' }, "Invalid field 'clip_end': must be greater than clip_start"],
      [{ clip_start: '60', clip_end: '01:00' }, "Invalid field 'clip_end': must be greater than clip_start"],
      [{ clip_end: '0' }, "Invalid field 'clip_end': must be greater than 0"],
    ];
    for (const [body, message] of bad) {
      it(`refuses ${JSON.stringify(body)}`, () => expect(err({ url: URL_OK, ...body })).to.equal(message));
    }
  });

  describe('quality_preset', () => {
    for (const [preset, crf] of Object.entries(QUALITY_PRESET_CRF)) {
      it(`${preset} → CRF ${crf}, overriding video_quality`, () => {
        expect(ok({ quality_preset: preset, video_quality: 40 }).options).to.include({ qualityPreset: preset, videoQuality: crf });
      });
    }
    it('the mapping is monotonic and medium is the default CRF', () => {
      expect(Object.values(QUALITY_PRESET_CRF)).to.deep.equal([18, 20, 23, 28, 32]);
    });
  });

  describe('rule 4: codec corrections', () => {
    const cases: [Record<string, unknown>, { videoCodec: string; audioCodec: string | undefined }][] = [
      [{ format: 'webm', video_codec: 'h264' }, { videoCodec: 'vp9', audioCodec: undefined }],
      [{ format: 'webm', audio_codec: 'aac' }, { videoCodec: 'copy', audioCodec: 'opus' }],
      [{ format: 'webm', video_codec: 'h264', audio_codec: 'aac' }, { videoCodec: 'vp9', audioCodec: 'opus' }],
      [{ format: 'ogg', audio_codec: 'aac' }, { videoCodec: 'copy', audioCodec: 'opus' }],
      [{ format: 'opus', audio_codec: 'aac' }, { videoCodec: 'copy', audioCodec: 'opus' }],
      [{ format: 'mp3', audio_codec: 'aac' }, { videoCodec: 'copy', audioCodec: 'mp3' }],
      [{ audio_bitrate: '128k' }, { videoCodec: 'copy', audioCodec: 'aac' }],
      [{ format: 'mp3', audio_bitrate: '320k' }, { videoCodec: 'copy', audioCodec: 'mp3' }],
      [{ format: 'webm', audio_bitrate: '128k' }, { videoCodec: 'copy', audioCodec: 'opus' }],
      [{ format: 'ogg', audio_bitrate: '128k' }, { videoCodec: 'copy', audioCodec: 'opus' }],
      [{ audio_bitrate: '128k', audio_codec: 'copy' }, { videoCodec: 'copy', audioCodec: 'copy' }],
      [{ format: 'mp4', video_codec: 'h264', audio_codec: 'aac' }, { videoCodec: 'h264', audioCodec: 'aac' }],
      [{ format: 'webm', video_codec: 'vp9', audio_codec: 'opus' }, { videoCodec: 'vp9', audioCodec: 'opus' }],
      [{ format: 'mkv', video_codec: 'h265', audio_codec: 'mp3' }, { videoCodec: 'h265', audioCodec: 'mp3' }],
      [{ format: 'bogus', video_codec: 'h264' }, { videoCodec: 'h264', audioCodec: undefined }],
    ];
    for (const [body, expected] of cases) {
      it(JSON.stringify(body), () => {
        const o = ok(body).options;
        expect({ videoCodec: o.videoCodec, audioCodec: o.audioCodec }).to.deep.equal(expected);
      });
    }
  });

  describe('storage fields', () => {
    it('storage and storage_provider together are exclusive', () => {
      expect(err({ url: URL_OK, storage: { provider: 's3' }, storage_provider: 's3' })).to.equal('storage_and_storage_provider_are_exclusive');
    });
    it('passes inline storage through for the gateway to check', () => {
      expect(ok({ storage: { provider: 's3', bucket: 'b' } }).storage).to.deep.equal({ provider: 's3', bucket: 'b' });
    });
  });

  describe('normaliseSpecOptions (MediaJobs applied with kubectl)', () => {
    // What the CRD defaults leave: the fields without a static default may be absent.
    const base = {
      url: URL_OK, videoCodec: 'copy', videoQuality: 23, maxResolution: 'best', audioOnly: false, downloadSubtitles: false, downloadThumbnail: false,
      liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
    } as const satisfies MediaJobSpecOptions;
    const cases: [string, Partial<MediaJobSpecOptions>, Record<string, unknown>][] = [
      ['only url: the POST /jobs defaults', {}, { format: 'mp4', audioBitrate: '192k' }],
      ['audioOnly: m4a', { audioOnly: true }, { format: 'm4a' }],
      ['a given bitrate selects aac', { audioBitrate: '128k' }, { audioCodec: 'aac', audioBitrate: '128k' }],
      ['webm + h264 + aac', { format: 'webm', videoCodec: 'h264', audioCodec: 'aac' }, { videoCodec: 'vp9', audioCodec: 'opus' }],
      ['mp3 + bitrate', { format: 'mp3', audioBitrate: '320k' }, { audioCodec: 'mp3' }],
      ['preset', { qualityPreset: 'low', videoQuality: 10 }, { videoQuality: 28 }],
    ];
    for (const [name, given, expected] of cases) {
      it(name, () => expect(normaliseSpecOptions({ ...base, ...given })).to.deep.include(expected));
    }
    it('agrees with parseJobRequest for the same options', () => {
      const viaApi = ok({ format: 'ogg', audio_codec: 'aac', quality_preset: 'high', folder: 'x' }).options;
      const viaSpec = normaliseSpecOptions({ ...base, format: 'ogg', audioCodec: 'aac', qualityPreset: 'high', folder: 'x' });
      expect(viaSpec).to.deep.equal(viaApi);
    });
    it('leaves an absent audio codec absent when no bitrate was given', () => {
      expect(normaliseSpecOptions(base)).not.to.have.property('audioCodec');
    });
  });
  describe('one normalisation for the gateway, the operator and the runner', () => {
    const bodies: Record<string, unknown>[] = [
      {}, { audio_only: true }, { audio_bitrate: '64k' }, { format: 'webm', video_codec: 'h264', audio_codec: 'aac' },
      { quality_preset: 'low', video_quality: 10 }, { format: 'mp3' }, { format: 'MKV', max_resolution: 720 },
      { clip_start: 1.5, clip_end: '0:04', filename: 'My Clip', folder: 'shows/s1', max_duration: 30, live_recording: true },
    ];
    it('what the gateway wrote reaches the runner unchanged (normalising a normalised spec changes nothing)', () => {
      for (const body of bodies) {
        const written = ok(body).options;
        expect(normaliseSpecOptions(written, 'service'), JSON.stringify(body)).to.deep.equal(written);
      }
    });
    it('the default bitrate the gateway writes is no choice: audio stays copy with fallback, where a client\'s bitrate selects aac', () => {
      const written = ok({}).options;
      expect(normaliseSpecOptions(written, 'service')).not.to.have.property('audioCodec');
      expect(normaliseSpecOptions({ url: URL_OK, audioBitrate: '192k' }, 'client')).to.include({ audioCodec: 'aac' });
    });
    it('a kubectl manifest the operator normalised reaches the runner unchanged', () => {
      const manifests: MediaJobSpecOptionsInput[] = [
        { url: URL_OK }, { url: URL_OK, audioBitrate: '128k' }, { url: URL_OK, audioOnly: true, qualityPreset: 'highest' },
        { url: URL_OK, format: 'ogg', audioCodec: 'aac' },
      ];
      for (const manifest of manifests) {
        const once = normaliseSpecOptions(manifest);
        expect(normaliseSpecOptions(once, 'service'), JSON.stringify(manifest)).to.deep.equal(once);
      }
    });
    it('fills what the apiserver fills: a manifest before and after the CRD\'s defaults normalises alike', () => {
      const defaulted = {
        url: URL_OK, videoCodec: 'copy', videoQuality: 23, maxResolution: 'best', audioOnly: false, downloadSubtitles: false,
        downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
      } as const;
      expect(normaliseSpecOptions({ url: URL_OK })).to.deep.equal(normaliseSpecOptions(defaulted));
    });
    it('throws on options the CRD would refuse rather than guessing', () => {
      expect(() => normaliseSpecOptions({ url: URL_OK, videoQuality: 60 })).to.throw();
      expect(() => normaliseSpecOptions({ url: URL_OK, format: 'avi' as never })).to.throw();
    });
  });
});
