// The runner's media decisions as tables: which formats a job downloads
// (spec rule 3), which codecs come out of which container (rules 4 and 5),
// CRF and bitrate, and how a clip becomes ffmpeg arguments. Pure functions;
// mux.test.ts checks the same decisions against ffmpeg itself.
import { expect } from 'chai';
import { FORMATS, VIDEO_CODECS, AUDIO_CODECS, type Format, type MaxResolution, type MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { QUALITY_PRESET_CRF } from '@mediajobs/lib/job-options';
import { parseSpec } from '../src/config.js';
import { muxPlan, PIPE_OUTPUT, type Probed } from '../src/ffmpeg.js';
import {
  AUDIO_OK, VIDEO_OK, chooseFormats, clipOf, codecPlan, containerFor, encoderCrf, expectedDeliveryBytes, ffmpegCodecName, formatsToMeasure,
  shortSide, withMeasurements,
  type VideoTarget, type YtDlpFormat,
} from '../src/plan.js';

// What yt-dlp 2023.03.04's generic extractor reports for test/support/media.ts's
// ladders (trimmed to the fields the runner reads), in yt-dlp's order.
const dashHorizontal: YtDlpFormat[] = [
  { format_id: '6', vcodec: 'none', acodec: 'mp4a.40.2', tbr: 64, abr: 64, protocol: 'http_dash_segments' },
  { format_id: '7', vcodec: 'none', acodec: 'mp4a.40.2', tbr: 128, abr: 128, protocol: 'http_dash_segments' },
  { format_id: '8', vcodec: 'none', acodec: 'opus', tbr: 48, abr: 48, protocol: 'http_dash_segments' },
  { format_id: '0', vcodec: 'avc1.42c00c', acodec: 'none', width: 256, height: 144, tbr: 46 },
  { format_id: '1', vcodec: 'avc1.42c015', acodec: 'none', width: 426, height: 240, tbr: 128 },
  { format_id: '2', vcodec: 'avc1.42c01e', acodec: 'none', width: 640, height: 360, tbr: 288 },
  { format_id: '3', vcodec: 'avc1.42c01e', acodec: 'none', width: 854, height: 480, tbr: 512 },
  { format_id: '4', vcodec: 'avc1.42c01f', acodec: 'none', width: 1280, height: 720, tbr: 1152 },
  { format_id: '5', vcodec: 'avc1.42c028', acodec: 'none', width: 1920, height: 1080, tbr: 2592 },
];
const dashVertical: YtDlpFormat[] = [
  ...dashHorizontal.slice(0, 3),
  { format_id: 'v240', vcodec: 'avc1.42c015', acodec: 'none', width: 240, height: 426, tbr: 128 },
  { format_id: 'v360', vcodec: 'avc1.42c01e', acodec: 'none', width: 360, height: 640, tbr: 288 },
  { format_id: 'v720', vcodec: 'avc1.42c01f', acodec: 'none', width: 720, height: 1280, tbr: 1152 },
  { format_id: 'v1080', vcodec: 'avc1.42c028', acodec: 'none', width: 1080, height: 1920, tbr: 2592 },
];
// HLS: EXT-X-MEDIA audio renditions come with neither codec nor bitrate.
const hlsAudio: YtDlpFormat[] = ['a64', 'a128', 'opus'].map((id) => ({
  format_id: `group_A1-${id}`, vcodec: 'none', protocol: 'm3u8_native', url: `http://media/${id}.m3u8`,
}));
const hlsHorizontal: YtDlpFormat[] = [...hlsAudio, ...dashHorizontal.slice(3).map((f) => ({ ...f, protocol: 'm3u8_native' }))];
// A YouTube-like list: storyboard, DRM, one resolution in three codecs, AAC and Opus.
const youtube: YtDlpFormat[] = [
  { format_id: 'sb0', vcodec: 'none', acodec: 'none', ext: 'mhtml', width: 48, height: 27 },
  { format_id: '139', vcodec: 'none', acodec: 'mp4a.40.5', abr: 48.8 },
  { format_id: '140', vcodec: 'none', acodec: 'mp4a.40.2', abr: 129.5 },
  { format_id: '251', vcodec: 'none', acodec: 'opus', abr: 135.2 },
  { format_id: 'drm', vcodec: 'avc1.640028', acodec: 'none', width: 1920, height: 1080, has_drm: true },
  { format_id: '18', vcodec: 'avc1.42001E', acodec: 'mp4a.40.2', width: 640, height: 360, tbr: 500 },
  { format_id: '137', vcodec: 'avc1.640028', acodec: 'none', width: 1920, height: 1080, tbr: 4400 },
  { format_id: '248', vcodec: 'vp9', acodec: 'none', width: 1920, height: 1080, tbr: 2600 },
  { format_id: '399', vcodec: 'av01.0.08M.08', acodec: 'none', width: 1920, height: 1080, tbr: 2200 },
];

/** A spec as the plan gets it in the pod: through parseSpec, so normalised (defaults, the preset's CRF). */
const parsed = (o: Partial<MediaJobSpec> = {}) => parseSpec(JSON.stringify({ url: 'https://media.example/v', ...o }));
const job = (o: Partial<MediaJobSpec> = {}) => ({ maxResolution: 'best' as MaxResolution, videoCodec: 'copy' as const, ...o });
const ids = (formats: readonly YtDlpFormat[], spec: Partial<MediaJobSpec> = {}, format: Format = 'mp4', audioOnly = false) =>
  chooseFormats(formats, job(spec), containerFor({ format, audioOnly }))?.formats.map((f) => f.format_id);

describe('runner plan: formats, codecs, clips', () => {
  describe('codec names', () => {
    const table: [string | null | undefined, string | undefined][] = [
      ['avc1.64001f', 'h264'], ['avc3.42c01e', 'h264'], ['h264', 'h264'], ['hev1.1.6.L93.B0', 'hevc'], ['hvc1.2.4.L120', 'hevc'],
      ['vp09.00.10.08', 'vp9'], ['vp9', 'vp9'], ['vp8', 'vp8'], ['av01.0.08M.08', 'av1'], ['mp4a.40.2', 'aac'], ['mp4a.40.5', 'aac'],
      ['mp4a.40.34', 'mp3'], ['mp4a.6B', 'mp3'], ['mp3', 'mp3'], ['opus', 'opus'], ['vorbis', 'vorbis'], ['ac-3', 'ac3'],
      ['ec-3', 'eac3'], ['fLaC', 'flac'], ['none', 'none'], [null, undefined], [undefined, undefined], ['theora', 'theora'],
    ];
    for (const [given, want] of table) {
      it(`${String(given)} → ${String(want)}`, () => expect(ffmpegCodecName(given)).to.equal(want));
    }
  });

  describe('containers', () => {
    it('defaults to mp4, or m4a for audio-only manifests that leave format out; audio formats are audio-only', () => {
      expect(containerFor(parsed({ audioOnly: false }))).to.include({ format: 'mp4', ext: 'mp4', muxer: 'mp4', contentType: 'video/mp4', audioOnly: false });
      expect(containerFor(parsed({ audioOnly: true }))).to.include({ format: 'm4a', muxer: 'ipod', audioOnly: true });
      for (const f of ['mp3', 'ogg', 'opus', 'm4a'] as const) expect(containerFor({ format: f, audioOnly: false }).audioOnly, f).to.equal(true);
    });

    it('streams (mux piped into the upload) only what needs no seek back: fragmented mp4, ogg, opus', () => {
      const streamed = FORMATS.filter((f) => containerFor({ format: f, audioOnly: false }).streamable);
      expect(streamed).to.deep.equal(['mp4', 'ogg', 'opus']);
      expect(containerFor({ format: 'mp4', audioOnly: false }).muxerArgs.join(' ')).to.contain('+frag_keyframe+empty_moov');
      for (const f of ['mov', 'm4a'] as const) expect(containerFor({ format: f, audioOnly: false }).muxerArgs).to.deep.equal(['-movflags', '+faststart']);
    });
  });

  describe('resolution (rule 3): the shorter side decides, for horizontal and vertical alike', () => {
    const cases: [string, YtDlpFormat[], MaxResolution, string][] = [
      ['horizontal', dashHorizontal, 'best', '5'],
      ['horizontal', dashHorizontal, 'lowest', '0'],
      ['horizontal', dashHorizontal, '144', '0'],
      ['horizontal', dashHorizontal, '240', '1'],
      ['horizontal', dashHorizontal, '360', '2'],
      ['horizontal', dashHorizontal, '480', '3'],
      ['horizontal', dashHorizontal, '720', '4'],
      ['horizontal', dashHorizontal, '1080', '5'],
      ['horizontal', dashHorizontal, '1440', '5'],
      ['horizontal', dashHorizontal, '2160', '5'],
      ['vertical', dashVertical, 'best', 'v1080'],
      ['vertical', dashVertical, 'lowest', 'v240'],
      // Every format exceeds 144: the smallest, never resized.
      ['vertical', dashVertical, '144', 'v240'],
      // 360x640 is the highest at or below 480 by its shorter side; by height it would be 240x426.
      ['vertical', dashVertical, '480', 'v360'],
      ['vertical', dashVertical, '720', 'v720'],
      ['vertical', dashVertical, '1440', 'v1080'],
    ];
    for (const [name, formats, res, want] of cases) {
      it(`${name} ${res} → ${want}`, () => expect(ids(formats, { maxResolution: res })?.[0]).to.equal(want));
    }

    it('shorter side of a frame', () => {
      expect([shortSide({ width: 1920, height: 1080 }), shortSide({ width: 1080, height: 1920 }), shortSide({ width: 640 })]).to.deep.equal([1080, 1080, undefined]);
    });

    it('among formats of the chosen size, a codec the container holds wins when copying; otherwise yt-dlp order (best last)', () => {
      expect(ids(youtube, {}, 'mp4')?.[0]).to.equal('399'); // all fit mp4: yt-dlp's best
      expect(ids(youtube, {}, 'webm')?.[0]).to.equal('399'); // vp9 and av1 fit
      expect(ids(youtube, {}, 'mov')?.[0]).to.equal('137'); // only h264 goes into mov as is
      expect(ids(youtube, { videoCodec: 'h264' }, 'mov')?.[0]).to.equal('399'); // re-encoded anyway
      expect(ids(youtube, { maxResolution: '360' })).to.deep.equal(['18', '251']); // a muxed format, with the best separate track
    });

    it('skips storyboards and DRM formats', () => {
      const withDrmOnly = youtube.filter((f) => f.format_id !== '137' && f.format_id !== '248' && f.format_id !== '399');
      expect(ids(withDrmOnly)?.[0]).to.equal('18');
      expect(ids([youtube[0]!])).to.equal(undefined);
    });

    it('a plain file (codecs and size unknown) is taken as it is, for video and audio', () => {
      const plain: YtDlpFormat[] = [{ format_id: 'mp4', ext: 'mp4' }];
      const choice = chooseFormats(plain, job({ maxResolution: '144' }), containerFor(parsed({ audioOnly: false })));
      expect(choice).to.deep.equal({ formats: plain, audioFrom: 'mp4' });
      expect(chooseFormats(plain, job(), containerFor(parsed({ audioOnly: true })))).to.deep.equal({ formats: plain, audioFrom: 'mp4' });
    });

    it('an audio-only source in a video job delivers its audio', () => {
      expect(ids(dashHorizontal.slice(0, 3))).to.deep.equal(['7']);
    });
  });

  describe('separate audio', () => {
    const cases: [string, Partial<MediaJobSpec>, Format, boolean, string][] = [
      ['mp4 takes the highest-bitrate track it holds as is', {}, 'mp4', false, '7'],
      ['mkv the same', {}, 'mkv', false, '7'],
      ['webm the Opus track (AAC would need a re-encode)', {}, 'webm', false, '8'],
      ['audio_only (m4a) the AAC track, so nothing is re-encoded', { audioOnly: true }, 'm4a', true, '7'],
      ['opus the Opus track', {}, 'opus', true, '8'],
      ['mp3 (no MP3 track) the highest bitrate, to encode from', {}, 'mp3', true, '7'],
      ['144: the lowest AAC track', { maxResolution: '144' }, 'mp4', false, '6'],
      ['lowest: the lowest AAC track, not the lower-bitrate Opus one', { maxResolution: 'lowest' }, 'mp4', false, '6'],
      ['144 in webm: the lowest track webm holds', { maxResolution: '144' }, 'webm', false, '8'],
      ['144 with an audio codec given: the highest, to encode from', { maxResolution: '144', audioCodec: 'opus' }, 'mp4', false, '7'],
      ['144 with copy given: the best the container holds', { maxResolution: '144', audioCodec: 'copy' }, 'mp4', false, '7'],
      ['240 is not 144: the best', { maxResolution: '240' }, 'mp4', false, '7'],
    ];
    for (const [what, spec, format, audioOnly, want] of cases) {
      it(what, () => {
        const choice = chooseFormats(dashHorizontal, job(spec), containerFor({ format, audioOnly }))!;
        const audio = choice.formats.find((f) => f.vcodec === 'none');
        expect(audio?.format_id).to.equal(want);
        expect(choice.audioFrom).to.equal(want);
      });
    }

    it('YouTube: Opus 251 for mp4, AAC 140 for m4a, AAC 139 for lowest', () => {
      expect(ids(youtube)?.[1]).to.equal('251');
      expect(ids(youtube, { audioOnly: true }, 'm4a', true)).to.deep.equal(['140']);
      expect(ids(youtube, { maxResolution: 'lowest' })).to.deep.equal(['18', '139']);
    });

    it('the original language first: a dubbed track never wins on bitrate', () => {
      const dubbed: YtDlpFormat[] = [
        { format_id: '140-dub', vcodec: 'none', acodec: 'mp4a.40.2', abr: 160, language_preference: -10 },
        { format_id: '140', vcodec: 'none', acodec: 'mp4a.40.2', abr: 129.5, language_preference: 10 },
        { format_id: '139', vcodec: 'none', acodec: 'mp4a.40.5', abr: 48.8, language_preference: 10 },
        { format_id: '139-dub', vcodec: 'none', acodec: 'mp4a.40.5', abr: 30, language_preference: -10 },
        youtube[7]!,
      ];
      expect(ids(dubbed)).to.deep.equal(['248', '140']);
      expect(ids(dubbed, { maxResolution: 'lowest' })).to.deep.equal(['248', '139']);
    });

    it('HLS audio renditions yt-dlp knows nothing of are measured, then chosen by the same rules', () => {
      expect(formatsToMeasure(hlsHorizontal).map((f) => f.format_id)).to.deep.equal(hlsAudio.map((f) => f.format_id));
      expect(formatsToMeasure(dashHorizontal)).to.deep.equal([]);
      expect(formatsToMeasure([hlsAudio[0]!, ...dashHorizontal.slice(3)]), 'one track: nothing to choose').to.deep.equal([]);
      const measured = new Map([
        ['group_A1-a64', { codec: 'aac', kbps: 65 }], ['group_A1-a128', { codec: 'aac', kbps: 126 }], ['group_A1-opus', { codec: 'opus', kbps: 55 }],
      ]);
      const formats = withMeasurements(hlsHorizontal, measured);
      expect(formats[0]).to.include({ acodec: 'aac', abr: 65 });
      expect(ids(formats)).to.deep.equal(['5', 'group_A1-a128']);
      expect(ids(formats, { maxResolution: '144' })).to.deep.equal(['0', 'group_A1-a64']);
      expect(ids(formats, {}, 'webm')).to.deep.equal(['5', 'group_A1-opus']);
      // What yt-dlp did know is kept.
      expect(withMeasurements(dashHorizontal, new Map([['6', { codec: 'opus', kbps: 1 }]]))[0]).to.include({ acodec: 'mp4a.40.2', abr: 64 });
    });
  });

  describe('expected size (the key\'s storage reservation)', () => {
    // YouTube gives exact sizes for some formats, yt-dlp's estimate (bitrate × duration) for others.
    const sized: YtDlpFormat[] = youtube.map((f) => ({
      ...f, ...({ 140: { filesize: 3_000_000 }, 251: { filesize_approx: 3_200_000 }, 399: { filesize: 60_000_000 }, 18: { filesize: 11_000_000 } }[f.format_id] ?? {}),
    }));
    const expected = (spec: Partial<MediaJobSpec>, format: Format, audioOnly: boolean, duration: number | undefined, formats = sized) => {
      const choice = chooseFormats(formats, job(spec), containerFor({ format, audioOnly }))!;
      return expectedDeliveryBytes(choice.formats, duration, clipOf(spec));
    };

    it('video and audio: the two chosen formats\' sizes together, exact or approximate', () => {
      expect(expected({}, 'mkv', false, 600)).to.equal(60_000_000 + 3_200_000);
    });

    it('audio only: the chosen audio format alone', () => {
      expect(expected({ audioOnly: true }, 'm4a', true, 600)).to.equal(3_000_000);
    });

    it('a clip: its share of the duration; the whole when the duration is unknown', () => {
      expect(expected({ clipStart: '00:01:00', clipEnd: '00:02:00' }, 'mkv', false, 600)).to.equal(Math.ceil((63_200_000 * 60) / 600));
      expect(expected({ clipStart: '00:09:00' }, 'm4a', true, 600), 'to the end').to.equal(300_000);
      expect(expected({ clipStart: '00:01:00', clipEnd: '00:02:00' }, 'mkv', false, undefined)).to.equal(63_200_000);
    });

    it('a size nobody gave: what the server said (Content-Length), else unknown', () => {
      const plain: YtDlpFormat[] = [{ format_id: 'mp4', url: 'http://media/v.mp4', protocol: 'http' }];
      const choice = chooseFormats(plain, job(), containerFor({ format: 'mp4', audioOnly: false }))!;
      expect(expectedDeliveryBytes(choice.formats, 3, undefined, new Map([['mp4', 123_456]]))).to.equal(123_456);
      expect(expectedDeliveryBytes(choice.formats, 3, undefined)).to.equal(undefined);
      // One format of two without a size: no sum would be honest.
      expect(expected({}, 'mkv', false, 600, youtube)).to.equal(undefined);
    });
  });

  describe('codecs (rules 4 and 5): never a pair the container cannot hold', () => {
    const sources = [
      { video: 'h264', audio: 'aac' }, { video: 'vp9', audio: 'opus' }, { video: 'hevc', audio: 'mp3' },
      { video: 'av1', audio: 'vorbis' }, { video: 'vp8', audio: 'flac' }, { video: 'mpeg4', audio: 'ac3' },
    ];
    it('every format × video codec × audio codec × source codecs gives codecs the container takes', () => {
      let checked = 0;
      for (const format of FORMATS) {
        const container = containerFor({ format, audioOnly: false });
        for (const videoCodec of VIDEO_CODECS) {
          for (const audioCodec of [undefined, ...AUDIO_CODECS]) {
            for (const source of sources) {
              const plan = codecPlan({ videoCodec, audioCodec, audioBitrate: '192k', videoQuality: 23 }, container, source);
              const at = `${format} ${videoCodec}/${String(audioCodec)} from ${source.video}/${source.audio}`;
              if (container.audioOnly) expect(plan.video, at).to.equal(undefined);
              else expect(VIDEO_OK[format].includes('*') || VIDEO_OK[format].includes(plan.video!.codec), at).to.equal(true);
              expect(AUDIO_OK[format].includes('*') || AUDIO_OK[format].includes(plan.audio!.codec), at).to.equal(true);
              // Copy only ever copies, and explicit codecs the container holds are honoured.
              if (videoCodec === 'copy' && plan.video?.copy) expect(plan.video.codec).to.equal(source.video);
              if (audioCodec && audioCodec !== 'copy' && AUDIO_OK[format].includes(audioCodec)) expect(plan.audio, at).to.deep.include({ copy: false, codec: audioCodec });
              checked++;
            }
          }
        }
      }
      expect(checked).to.equal(8 * 4 * 5 * 6);
    });

    const cs = (format: Format, o: Partial<MediaJobSpec>, source = { video: 'h264', audio: 'aac' }) => {
      const p = codecPlan({ videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, ...o }, containerFor({ format, audioOnly: false }), source);
      return `${p.video ? (p.video.copy ? 'copy' : p.video.codec) : '-'}/${p.audio ? (p.audio.copy ? 'copy' : p.audio.codec) : '-'}`;
    };
    const table: [string, Format, Partial<MediaJobSpec>, { video: string; audio: string } | undefined, string][] = [
      ['copy by default', 'mp4', {}, undefined, 'copy/copy'],
      ['Opus and VP9 go into mp4 as they are', 'mp4', {}, { video: 'vp9', audio: 'opus' }, 'copy/copy'],
      ['audio mp4 cannot hold falls back to aac', 'mp4', {}, { video: 'h264', audio: 'vorbis' }, 'copy/aac'],
      ['webm: copy falls back to vp9 and opus', 'webm', {}, undefined, 'vp9/opus'],
      ['webm+h264 → vp9 (rule 4, also when the gateway did not apply it)', 'webm', { videoCodec: 'h264' }, undefined, 'vp9/opus'],
      ['webm+h265 → vp9', 'webm', { videoCodec: 'h265' }, undefined, 'vp9/opus'],
      ['webm+aac → opus (rule 4)', 'webm', { audioCodec: 'aac' }, { video: 'vp9', audio: 'opus' }, 'copy/opus'],
      ['ogg+aac → opus (rule 4)', 'ogg', { audioCodec: 'aac' }, undefined, '-/opus'],
      ['opus+aac → opus (rule 4)', 'opus', { audioCodec: 'aac' }, undefined, '-/opus'],
      ['mp3+aac → mp3 (rule 4)', 'mp3', { audioCodec: 'aac' }, undefined, '-/mp3'],
      ['ogg+mp3 → opus', 'ogg', { audioCodec: 'mp3' }, undefined, '-/opus'],
      ['m4a+mp3 → aac (the ipod muxer refuses MP3)', 'm4a', { audioCodec: 'mp3' }, undefined, '-/aac'],
      ['m4a+opus → aac', 'm4a', { audioCodec: 'opus' }, undefined, '-/aac'],
      ['m4a copies AAC (rule 5: no re-encoding by default)', 'm4a', {}, undefined, '-/copy'],
      ['m4a re-encodes Opus to AAC', 'm4a', {}, { video: 'vp9', audio: 'opus' }, '-/aac'],
      ['mov+vp9 → h264 (mov refuses VP9)', 'mov', { videoCodec: 'vp9' }, undefined, 'h264/copy'],
      ['mov cannot copy VP9 or Opus', 'mov', {}, { video: 'vp9', audio: 'opus' }, 'h264/aac'],
      ['mkv copies anything', 'mkv', {}, { video: 'vp8', audio: 'flac' }, 'copy/copy'],
      ['explicit codecs encode', 'mkv', { videoCodec: 'h265', audioCodec: 'mp3' }, undefined, 'hevc/mp3'],
    ];
    for (const [what, format, o, source, want] of table) it(what, () => expect(cs(format, o, source)).to.equal(want));
  });

  describe('CRF and bitrate: only when encoding', () => {
    const mp4 = containerFor({ format: 'mp4', audioOnly: false });
    const args = (o: Partial<MediaJobSpec>, source = { video: 'h264', audio: 'aac' }, reencodeVideo = false) => {
      const p = codecPlan(parsed({ videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, ...o }), mp4, source, { reencodeVideo });
      return [...(p.video && !p.video.copy ? p.video.args : ['copy']), '|', ...(p.audio && !p.audio.copy ? p.audio.args : ['copy'])].join(' ');
    };
    it('copy ignores video_quality and audio_bitrate', () => {
      expect(args({ videoQuality: 10, audioBitrate: '64k' })).to.equal('copy | copy');
    });
    it('video_quality is the CRF of an encode, on libx264\'s scale; a preset overrides it with its documented CRF', () => {
      expect(args({ videoCodec: 'h264', videoQuality: 30 })).to.equal('-c:v libx264 -preset veryfast -pix_fmt yuv420p -crf 30 | copy');
      for (const [preset, crf] of Object.entries(QUALITY_PRESET_CRF)) {
        expect(args({ videoCodec: 'h264', videoQuality: 40, qualityPreset: preset as MediaJobSpec['qualityPreset'] }), preset)
          .to.equal(`-c:v libx264 -preset veryfast -pix_fmt yuv420p -crf ${crf} | copy`);
      }
    });
    // The table runner-image/README.md documents: a preset means comparable
    // quality whatever the codec, so each encoder gets its own scale's number.
    const PRESET_CRF_PER_ENCODER: Record<string, Record<VideoTarget, number>> = {
      highest: { h264: 18, h265: 22, vp9: 24 },
      high: { h264: 20, h265: 24, vp9: 27 },
      medium: { h264: 23, h265: 28, vp9: 31 },
      low: { h264: 28, h265: 32, vp9: 37 },
      lowest: { h264: 32, h265: 35, vp9: 41 },
    };
    it('each encoder gets the CRF of its own scale: x265 offset (28 ≈ x264 23), libvpx-vp9 0–63 (31 ≈ x264 23)', () => {
      expect(Object.keys(PRESET_CRF_PER_ENCODER)).to.deep.equal(Object.keys(QUALITY_PRESET_CRF));
      for (const [preset, crfs] of Object.entries(PRESET_CRF_PER_ENCODER)) {
        const qualityPreset = preset as MediaJobSpec['qualityPreset'];
        expect(args({ videoCodec: 'h265', videoQuality: 40, qualityPreset }), preset)
          .to.equal(`-c:v libx265 -preset veryfast -x265-params log-level=error -crf ${crfs.h265} -tag:v hvc1 | copy`);
        const webm = codecPlan(parsed({ format: 'webm', videoCodec: 'vp9', audioBitrate: '192k', videoQuality: 40, qualityPreset }), containerFor({ format: 'webm', audioOnly: false }), { video: 'h264' });
        expect((webm.video as { args: string[] }).args.join(' '), preset)
          .to.equal(`-c:v libvpx-vp9 -deadline good -cpu-used 4 -row-mt 1 -b:v 0 -crf ${crfs.vp9}`);
      }
      // video_quality maps the same way (the default 23 included).
      expect(args({ videoCodec: 'vp9' })).to.match(/-b:v 0 -crf 31 \| copy$/);
      expect(args({ videoCodec: 'h265', videoQuality: 23 })).to.contain('-crf 28 ');
    });
    it('the mapping keeps the ends and the order of the API scale', () => {
      for (const target of ['h264', 'h265', 'vp9'] as const) {
        const max = target === 'vp9' ? 63 : 51;
        expect(encoderCrf(target, 0), target).to.equal(0);
        expect(encoderCrf(target, 51), target).to.equal(max);
        expect(encoderCrf(target, 99), `${target} clamps`).to.equal(max);
        for (let c = 1; c <= 51; c++) expect(encoderCrf(target, c), `${target} ${c}`).to.be.at.least(encoderCrf(target, c - 1));
      }
      for (let c = 0; c <= 51; c++) expect(encoderCrf('h264', c)).to.equal(c);
    });
    it('audio_bitrate applies to an audio encode, requested or fallen back to', () => {
      expect(args({ audioCodec: 'aac', audioBitrate: '64k' })).to.equal('copy | -c:a aac -b:a 64k');
      expect(args({ audioBitrate: '320k' }, { video: 'h264', audio: 'vorbis' })).to.equal('copy | -c:a aac -b:a 320k');
      expect(args({ audioCodec: 'mp3', audioBitrate: '256k' })).to.equal('copy | -c:a libmp3lame -b:a 256k');
    });
    it('an exact cut re-encodes in the source codec family', () => {
      expect(args({}, { video: 'h264', audio: 'aac' }, true)).to.match(/^-c:v libx264 .*-crf 23 \| copy$/);
      expect(args({}, { video: 'hevc', audio: 'aac' }, true)).to.match(/^-c:v libx265 /);
      expect(args({}, { video: 'vp9', audio: 'aac' }, true)).to.match(/^-c:v libvpx-vp9 /);
      expect(args({}, { video: 'mpeg4', audio: 'aac' }, true)).to.match(/^-c:v libx264 /);
    });
  });

  describe('clipping', () => {
    it('reads HH:MM:SS, MM:SS and seconds; no clip when neither is given', () => {
      expect(clipOf({ clipStart: '00:01:02', clipEnd: '1:30' })).to.deep.equal({ start: 62, end: 90 });
      expect(clipOf({ clipStart: '83.5' })).to.deep.equal({ start: 83.5 });
      expect(clipOf({ clipEnd: '01:00:00' })).to.deep.equal({ start: 0, end: 3600 });
      expect(clipOf({})).to.equal(undefined);
      expect(clipOf({ clipStart: '0' })).to.equal(undefined);
      // Never dropped: parseSpec refused such a spec (invalid_spec); should one get here, the job fails rather than deliver the whole media.
      expect(() => clipOf({ clipStart: '10', clipEnd: '5' }), 'never cut backwards').to.throw('spec.clipEnd is not after clipStart');
      expect(() => clipOf({ clipStart: '1:75' })).to.throw('spec.clipStart is not a time the runner can read');
    });

    const video: Probed = { durationSeconds: 6, streams: [{ index: 0, codec_type: 'video', codec_name: 'h264', width: 640, height: 360 }] };
    const audio: Probed = { durationSeconds: 6.02, streams: [{ index: 0, codec_type: 'audio', codec_name: 'aac' }] };
    const inputs = [{ path: '/w/v.mp4', probed: video }, { path: '/w/a.m4a', probed: audio, carriesAudio: true }];
    const spec = { videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23 } as const;

    it('seeks every input, cuts the clip length, and drops copied audio from before the start', () => {
      const plan = muxPlan(inputs, '/w/out.mkv', containerFor({ format: 'mkv', audioOnly: false }), spec, { clip: { start: 1.5, end: 4 } })!;
      expect(plan.args.join(' ')).to.contain('-ss 1.500 -i /w/v.mp4 -ss 1.500 -i /w/a.m4a -map 0:0 -map 1:0 -c:v copy -c:a copy -t 2.500 -copypriorss:a 0 -f matroska /w/out.mkv');
      expect(plan.durationSeconds).to.equal(2.5);
      const open = muxPlan(inputs, '/w/out.mkv', containerFor({ format: 'mkv', audioOnly: false }), spec, { clip: { start: 2 } })!;
      expect(open.args).to.not.include('-t');
      expect(open.durationSeconds).to.be.closeTo(4.02, 1e-9);
      const encoded = muxPlan(inputs, '/w/out.mkv', containerFor({ format: 'mkv', audioOnly: false }), { ...spec, audioCodec: 'opus' }, { clip: { start: 1 } })!;
      expect(encoded.args, 'an encode starts exactly anyway').to.not.include('-copypriorss:a');
    });

    it('streams mp4 to stdout with progress on fd 3; AAC copied into fragmented MP4 gets its ADTS headers converted', () => {
      const plan = muxPlan(inputs, PIPE_OUTPUT, containerFor({ format: 'mp4', audioOnly: false }), spec)!;
      expect(plan.streaming).to.equal(true);
      expect(plan.args.join(' ')).to.contain('-progress pipe:3');
      expect(plan.args.join(' ')).to.match(/-bsf:a aac_adtstoasc -f mp4 -movflags \+frag_keyframe\+empty_moov\S* .*pipe:1$/);
      expect(plan.video?.stream.width).to.equal(640);
    });

    it('cover art is not video; an audio-only job without audio has nothing to deliver', () => {
      const cover: Probed = { streams: [{ index: 0, codec_type: 'video', codec_name: 'mjpeg', disposition: { attached_pic: 1 } }, { index: 1, codec_type: 'audio', codec_name: 'aac' }] };
      const m4a = containerFor(parsed({ audioOnly: true }));
      expect(muxPlan([{ path: '/w/a.m4a', probed: cover }], '/w/o.m4a', m4a, spec)!.args.join(' ')).to.contain('-map 0:1 -c:a copy -f ipod');
      expect(muxPlan([{ path: '/w/v.mp4', probed: video }], '/w/o.m4a', m4a, spec)).to.equal(undefined);
    });

    it('takes the audio from the separate audio format even when the video file has audio too', () => {
      const muxedVideo: Probed = { ...video, streams: [...video.streams, { index: 1, codec_type: 'audio', codec_name: 'aac' }] };
      const plan = muxPlan([{ path: '/w/v.mp4', probed: muxedVideo }, { path: '/w/a.m4a', probed: audio, carriesAudio: true }], '/w/o.mkv', containerFor({ format: 'mkv', audioOnly: false }), spec)!;
      expect(plan.args.join(' ')).to.contain('-map 0:0 -map 1:0');
    });
  });
});
