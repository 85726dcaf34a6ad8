// Shared fixtures of the media-info tests (lib and gateway): the URL forms
// of the supported platform, taken from yt-dlp's YoutubeIE._VALID_URL and
// the URLs of its _TESTS, and the URLs it must refuse.
import type { VideoUrlForm } from '../src/media-info/platform-url.js';

export const ID = 'BaW_jenozKc';
export const WATCH = `https://www.youtube.com/watch?v=${ID}`;

/** Every accepted form: [url, form, id]. */
export const ACCEPTED: [string, VideoUrlForm, string][] = [
  // watch
  [`https://www.youtube.com/watch?v=${ID}`, 'watch', ID],
  [`http://www.youtube.com/watch?v=${ID}`, 'watch', ID],
  [`https://youtube.com/watch?v=${ID}`, 'watch', ID],
  [`https://www.youtube.com/watch?v=${ID}&t=1s&end=9`, 'watch', ID],
  [`https://www.youtube.com/watch?app=desktop&v=${ID}`, 'watch', ID],
  [`https://www.youtube.com/watch?v=${ID}&list=PLwiyx1dc3P2JR9N8gQaQN_BCvlSlap7re&index=2`, 'watch', ID],
  [`https://www.youtube.com/watch?feature=player_embedded&amp;amp;v=${ID}`, 'watch', ID],
  [`https://www.youtube.com/watch/?v=${ID}`, 'watch', ID],
  [`https://www.youtube.com/watch_popup?v=${ID}`, 'watch', ID],
  [`https://www.youtube.com/?v=${ID}`, 'watch', ID],
  [`https://www.youtube.com/watch#!v=${ID}`, 'watch', ID],
  [`https://www.youtube.com/#/watch?v=${ID}`, 'watch', ID],
  [`https://WWW.YouTube.com/watch?v=${ID}`, 'watch', ID],
  // mobile, music and kids hosts
  [`https://m.youtube.com/watch?v=${ID}`, 'watch', ID],
  [`https://music.youtube.com/watch?v=${ID}&feature=share`, 'watch', ID],
  [`https://www.youtubekids.com/watch?v=${ID}`, 'watch', ID],
  // short link
  [`https://youtu.be/${ID}`, 'short-link', ID],
  [`https://youtu.be/${ID}?si=AbCdEfGh12345678`, 'short-link', ID],
  [`https://youtu.be/${ID}?t=42`, 'short-link', ID],
  [`https://youtu.be/${ID}?list=PLwiyx1dc3P2JR9N8gQaQN_BCvlSlap7re`, 'short-link', ID],
  // shorts
  [`https://www.youtube.com/shorts/${ID}`, 'shorts', ID],
  [`https://youtube.com/shorts/${ID}?feature=share`, 'shorts', ID],
  [`https://m.youtube.com/shorts/${ID}`, 'shorts', ID],
  // embed
  [`https://www.youtube.com/embed/${ID}`, 'embed', ID],
  [`https://www.youtube.com/embed/${ID}?start=10&autoplay=1`, 'embed', ID],
  [`https://www.youtube-nocookie.com/embed/${ID}`, 'embed', ID],
  [`https://www.youtube.com/e/${ID}`, 'embed', ID],
  // old player paths
  [`https://www.youtube.com/v/${ID}`, 'v', ID],
  [`https://www.youtube.com/v/${ID}&hl=en_US&fs=1`, 'v', ID],
  [`https://youtube.googleapis.com/v/${ID}`, 'v', ID],
  // live
  [`https://www.youtube.com/live/${ID}`, 'live', ID],
  [`https://www.youtube.com/live/${ID}?si=AbCdEfGh12345678&feature=share`, 'live', ID],
  // ids with - and _
  ['https://www.youtube.com/watch?v=_b-2C3KPAM0', 'watch', '_b-2C3KPAM0'],
  ['https://youtu.be/-wAXA7UdPhs', 'short-link', '-wAXA7UdPhs'],
];

/** Other platforms and mirrors: "not the supported platform". */
export const OTHER_PLATFORMS = [
  'https://vimeo.com/76979871',
  'https://www.dailymotion.com/video/x7tgad0',
  'https://www.tiktok.com/@user/video/7106594312292453675',
  'https://example.com/watch?v=BaW_jenozKc',
  'https://www.youtube.com.evil.example/watch?v=BaW_jenozKc',
  'https://notyoutube.com/watch?v=BaW_jenozKc',
  // Front-ends and mirrors yt-dlp also reads: other sites, not the platform.
  'https://invidio.us/watch?v=BaW_jenozKc',
  'https://redirect.invidious.io/watch?v=BaW_jenozKc',
  'https://vid.plus/FlRa-iH7PGw',
  'https://hooktube.com/watch?v=BaW_jenozKc',
];

/** The platform's own hosts, but not a single video. */
export const NOT_VIDEOS = [
  'https://www.youtube.com/',
  'https://www.youtube.com/watch',
  'https://www.youtube.com/watch?v=BaW_jenozK', // 10 characters: an incomplete id
  'https://www.youtube.com/watch?v=BaW_jenozKc1', // 12
  'https://www.youtube.com/watch?v=BaW_jen%zKc',
  'https://www.youtube.com/playlist?list=PLwiyx1dc3P2JR9N8gQaQN_BCvlSlap7re',
  'https://www.youtube.com/@NotJustBikes/shorts',
  'https://www.youtube.com/@NotJustBikes/live',
  'https://www.youtube.com/channel/UCLqxVugv74EIW3VWh2NOa3Q',
  'https://www.youtube.com/embed/videoseries?list=PLwiyx1dc3P2JR9N8gQaQN_BCvlSlap7re',
  'https://www.youtube.com/embed/live_stream?channel=UCLqxVugv74EIW3VWh2NOa3Q',
  'https://www.youtube.com/shorts/',
  'https://www.youtube.com/clip/UgkxU2HSeGL_NvmDJ-nQJrlLwllwMDBdGZFs',
  'https://www.youtube.com/results?search_query=test',
  'https://youtu.be/',
  'https://youtu.be/BaW_jen',
  'https://youtube.googleapis.com/embed/BaW_jenozKc',
  'https://www.youtube.com/constructor/BaW_jenozKc',
  'https://www.youtube.com/__proto__/BaW_jenozKc',
];

// ---------------------------------------------------------------------------
// Info JSON in the shapes `yt-dlp -J` prints for YouTube (format dicts as
// built by YoutubeIE._extract_formats_and_subtitles and _extract_storyboard,
// sorted worst to best as yt-dlp sorts them), trimmed to what matters.

type Fmt = Record<string, unknown>;

/** Storyboards: thumbnail grids with dimensions, but vcodec 'none'. Always horizontal thumbnails here, the risky case for a vertical video. */
function storyboards(): Fmt[] {
  return [[48, 27, 'sb2'], [80, 45, 'sb1'], [160, 90, 'sb0']].map(([width, height, id]) => ({
    format_id: id, format_note: 'storyboard', ext: 'mhtml', protocol: 'mhtml', acodec: 'none', vcodec: 'none',
    url: `https://i.ytimg.com/sb/${ID}/storyboard3_L1/M$M.jpg?sqp=x`, width, height, fps: 0.5, rows: 10, columns: 10,
    resolution: `${width}x${height}`, aspect_ratio: Math.round(((width as number) / (height as number)) * 100) / 100,
    audio_ext: 'none', video_ext: 'none',
  }));
}

function audio(id: string, ext: string, acodec: string, abr: number): Fmt {
  return {
    format_id: id, format_note: 'medium', ext, protocol: 'https', acodec, vcodec: 'none', abr, asr: 48000,
    audio_channels: 2, filesize: 1_234_567, tbr: abr, width: null, height: null, resolution: 'audio only', has_drm: false,
    container: `${ext}_dash`, audio_ext: ext, video_ext: 'none',
  };
}

function video(id: string, width: number, height: number, vcodec: string, extra: Fmt = {}): Fmt {
  return {
    format_id: id, format_note: `${Math.min(width, height)}p`, ext: vcodec.startsWith('vp') ? 'webm' : 'mp4', protocol: 'https',
    acodec: 'none', vcodec, width, height, fps: 30, tbr: width * height / 1000, filesize: width * height * 10, has_drm: false,
    dynamic_range: 'SDR', resolution: `${width}x${height}`, aspect_ratio: Math.round((width / height) * 100) / 100,
    video_ext: 'mp4', audio_ext: 'none', ...extra,
  };
}

function base(extra: Record<string, unknown>): Record<string, unknown> {
  return {
    id: ID, title: 'youtube-dl test video "\'/\\ä↭𝕐', channel: 'Philipp Hagemeister', uploader: 'Philipp Hagemeister',
    channel_id: 'UCLqxVugv74EIW3VWh2NOa3Q', upload_date: '20121002', description: 'test chars:  "\'/\\ä↭𝕐\ntest URL: https://github.com/rg3/youtube-dl/issues/1892',
    thumbnail: `https://i.ytimg.com/vi/${ID}/maxresdefault.jpg`, duration: 10, view_count: 1234567, like_count: 12345,
    extractor: 'youtube', extractor_key: 'Youtube', webpage_url: WATCH, availability: 'public', _has_drm: null, _type: 'video',
    ...extra,
  };
}

/** A regular 16:9 video, best 1280x720 (BaW_jenozKc-like). */
export const INFO_REGULAR = base({
  live_status: 'not_live', is_live: false, was_live: false,
  formats: [
    ...storyboards(),
    audio('139', 'm4a', 'mp4a.40.5', 48.8), audio('249', 'webm', 'opus', 53), audio('140', 'm4a', 'mp4a.40.2', 129.5), audio('251', 'webm', 'opus', 135),
    { ...video('17', 176, 144, 'mp4v.20.3'), acodec: 'mp4a.40.2', ext: '3gp' },
    video('160', 256, 144, 'avc1.4d400c'), video('278', 256, 144, 'vp9'), video('133', 426, 240, 'avc1.4d4015'), video('242', 426, 240, 'vp9'),
    video('134', 640, 360, 'avc1.4d401e'), video('243', 640, 360, 'vp9'),
    { ...video('18', 640, 360, 'avc1.42001E'), acodec: 'mp4a.40.2' },
    video('135', 854, 480, 'avc1.4d401f'), video('244', 854, 480, 'vp9'), video('136', 1280, 720, 'avc1.4d401f'), video('247', 1280, 720, 'vp9'),
    { ...video('22', 1280, 720, 'avc1.64001F'), acodec: 'mp4a.40.2' },
  ],
  format_id: '247+251', width: 1280, height: 720, vcodec: 'vp9', acodec: 'opus', filesize_approx: 9_216_000 + 1_234_567,
});

/** A Short: 1080x1920, with horizontal storyboards that must not count. */
export const INFO_SHORT = base({
  id: 'BGQWPY4IigY', duration: 58.4, live_status: 'not_live', is_live: false, was_live: false,
  formats: [
    ...storyboards(),
    audio('139', 'm4a', 'mp4a.40.5', 48.8), audio('140', 'm4a', 'mp4a.40.2', 129.5), audio('251', 'webm', 'opus', 135),
    video('160', 144, 256, 'avc1.4d400c'), video('133', 240, 426, 'avc1.4d4015'), video('134', 360, 640, 'avc1.4d401e'),
    { ...video('18', 360, 640, 'avc1.42001E'), acodec: 'mp4a.40.2' },
    video('135', 480, 854, 'avc1.4d401f'), video('136', 720, 1280, 'avc1.4d401f'), video('137', 1080, 1920, 'avc1.640028'), video('248', 1080, 1920, 'vp9'),
  ],
  format_id: '248+251', width: 1080, height: 1920, vcodec: 'vp9', acodec: 'opus',
});

/** A square video: height == width is not short. */
export const INFO_SQUARE = base({
  live_status: 'not_live', formats: [audio('140', 'm4a', 'mp4a.40.2', 129.5), video('134', 360, 360, 'avc1.4d401e'), video('136', 720, 720, 'avc1.4d401f')],
});

/** A stream that is live now: HLS formats (itags 91–96) carry dimensions. */
export const INFO_LIVE = base({
  id: 'qVv6vCqciTM', duration: null, live_status: 'is_live', is_live: true, was_live: false, release_timestamp: 1_710_000_000,
  formats: [91, 92, 93, 94, 95, 96].map((itag, i) => {
    const [w, h] = [[256, 144], [426, 240], [640, 360], [854, 480], [1280, 720], [1920, 1080]][i] as [number, number];
    return { ...video(String(itag), w, h, 'avc1.4d401f', { protocol: 'm3u8_native', format_note: `${h}p`, filesize: null }), acodec: 'mp4a.40.2', url: `https://manifest.googlevideo.com/api/manifest/hls_playlist/itag/${itag}/index.m3u8` };
  }),
});

/** A vertical live stream. */
export const INFO_LIVE_VERTICAL = base({
  duration: null, live_status: 'is_live', is_live: true,
  formats: [{ ...video('95', 720, 1280, 'avc1.4d401f', { protocol: 'm3u8_native', filesize: null }), acodec: 'mp4a.40.2' }],
});

/** A scheduled stream that has not started: no formats yet (--ignore-no-formats-error), live_status is_upcoming. */
export const INFO_UPCOMING = base({
  id: 'UPCOMING001', duration: null, view_count: null, like_count: null, live_status: 'is_upcoming', is_live: false, was_live: false,
  release_timestamp: 1_900_000_000, release_date: '20300317', formats: [],
});

/** A live stream whose formats say nothing about the picture (audio-only HLS variants). */
export const INFO_LIVE_NO_DIMENSIONS = base({
  duration: null, live_status: 'is_live', is_live: true,
  formats: [{ format_id: '233', ext: 'mp4', protocol: 'm3u8_native', acodec: 'mp4a.40.5', vcodec: 'none', tbr: 48, width: null, height: null }],
});

/** Only the boolean: an extractor that does not set live_status. */
export const INFO_LIVE_BOOLEAN_ONLY = base({ duration: null, is_live: true, formats: [] });

/** A finished stream: a recording, classified by its shape. */
export const INFO_WAS_LIVE = base({ live_status: 'was_live', is_live: false, was_live: true, duration: 7261, formats: [video('137', 1920, 1080, 'avc1.640028')] });

/** A stream just ended, not yet processed: no formats with dimensions in a lightweight run. */
export const INFO_POST_LIVE = base({ live_status: 'post_live', is_live: false, was_live: true, duration: null, formats: [...storyboards()] });

/** DRM: yt-dlp dropped the DRM formats and flagged `_has_drm`; storyboards remain. */
export const INFO_DRM = base({ _has_drm: true, live_status: 'not_live', formats: [...storyboards()] });

/** yt-dlp's generic extractor on a direct MP4 link: one format, no dimensions. */
export const INFO_DIRECT_MP4 = {
  id: 'video', title: 'video', timestamp: 1710505800, direct: true, upload_date: '20240315', extractor: 'generic', extractor_key: 'Generic',
  formats: [{ format_id: 'mp4', url: 'http://127.0.0.1:1/video.mp4', vcodec: null, ext: 'mp4', protocol: 'http', resolution: null, aspect_ratio: null }],
  format_id: 'mp4', url: 'http://127.0.0.1:1/video.mp4', vcodec: null, ext: 'mp4', _type: 'video',
};

/** A playlist with --flat-playlist: entries are not extracted. */
export const INFO_PLAYLIST = {
  _type: 'playlist', id: 'PLwiyx1dc3P2JR9N8gQaQN_BCvlSlap7re', title: 'ytdl test PL', extractor: 'youtube:tab',
  entries: [{ _type: 'url', ie_key: 'Youtube', id: ID, url: WATCH, title: 'x' }],
};

/** Info without a formats list: the top-level dimensions are the only format's. */
export const INFO_SINGLE_URL = { id: 'x', title: 'x', url: 'https://cdn.example/x.mp4', ext: 'mp4', width: 1080, height: 1350, extractor: 'someplatform' };

// ---------------------------------------------------------------------------
// What yt-dlp prints on stderr, in its own words (YouTube's playability
// reasons as yt-dlp passes them through, and its network errors in the
// Debian 2023.03.04 urllib wording and the newer TransportError wording).

const V = `ERROR: [youtube] ${ID}:`;
const REPORT = '; please report this issue on  https://github.com/yt-dlp/yt-dlp/issues?q= , filling out the appropriate issue template. Confirm you are on the latest version using  yt-dlp -U';

export const STDERR_CASES: [string, string][] = [
  [`${V} Private video. Sign in if you've been granted access to this video`, 'private'],
  [`WARNING: [youtube] ${ID}: Private video. Sign in if you've been granted access to this video\nWARNING: No video formats found!`, 'private'],
  [`${V} Video unavailable. This video has been removed by the uploader`, 'unavailable'],
  [`${V} Video unavailable`, 'unavailable'],
  [`${V} This video has been removed for violating YouTube's Terms of Service`, 'unavailable'],
  [`${V} This video requires payment to watch.`, 'unavailable'],
  [`${V} Video unavailable. This content isn't available, try again later.`, 'rate_limited'],
  [`${V} Unable to download API page: HTTP Error 429: Too Many Requests (caused by <HTTPError 429: 'Too Many Requests'>)${REPORT}`, 'rate_limited'],
  [`${V} Sign in to confirm you’re not a bot. This helps protect our community. Learn more`, 'bot_detection'],
  [`${V} Sign in to confirm you're not a bot. Use --cookies-from-browser or --cookies for the authentication.`, 'bot_detection'],
  [`${V} Sign in to confirm your age. This video may be inappropriate for some users.`, 'age_restricted'],
  [`${V} Join this channel to get access to members-only content like this video, and other exclusive perks.`, 'members_only'],
  [`${V} This video is available to this channel's members on level: Supporter (or any higher level). Join this channel to get access to members-only content and other exclusive perks.`, 'members_only'],
  [`${V} The uploader has not made this video available in your country. You might want to use a VPN or a proxy server (with --proxy) to workaround.`, 'geo_blocked'],
  [`${V} Video unavailable. This video is no longer available because the YouTube account associated with this video has been terminated.`, 'channel_terminated'],
  [`${V} Video unavailable. This video contains content from SME, who has blocked it in your country on copyright grounds.`, 'copyright'],
  [`${V} This video is DRM protected`, 'drm_protected'],
  ['ERROR: Unsupported URL: https://example.com/about', 'unsupported'],
  [`ERROR: [generic] None: Unable to download webpage: HTTP Error 404: Not Found (caused by <HTTPError 404: 'Not Found'>)${REPORT}`, 'unavailable'],
  [`ERROR: [generic] None: Unable to download webpage: HTTP Error 500: Internal Server Error (caused by <HTTPError 500: 'Internal Server Error'>)${REPORT}`, 'upstream_error'],
  [`${V} Unable to download API page: HTTP Error 403: Forbidden (caused by <HTTPError 403: 'Forbidden'>)`, 'upstream_error'],
  ["ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno 111] Connection refused> (caused by URLError(ConnectionRefusedError(111, 'Connection refused')))", 'connection_error'],
  [`${V} Unable to download API page: [Errno 104] Connection reset by peer (caused by TransportError('[Errno 104] Connection reset by peer'))`, 'connection_error'],
  [`${V} Unable to download webpage: <urlopen error Tunnel connection failed: 407 Proxy Authentication Required>`, 'connection_error'],
  ["ERROR: [generic] None: Unable to download webpage: <urlopen error [Errno -2] Name or service not known>", 'connection_error'],
  ['ERROR: [generic] None: Unable to download webpage: The read operation timed out', 'timeout'],
  [`${V} Unable to download API page: <urlopen error timed out>`, 'timeout'],
];
