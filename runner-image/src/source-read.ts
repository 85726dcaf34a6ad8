// Reading the chosen formats straight from their URLs (ADR 0007): ffmpeg
// fetches, muxes and feeds the upload in one pass, instead of yt-dlp writing
// every byte to disk and ffmpeg reading it back. Only for what ffmpeg fetches
// exactly as yt-dlp's own HTTP downloader would: one plain HTTP(S) file per
// format, with the headers the extractor gave it, certificates checked.
import { ffprobe, httpInputArgs, type MuxInput } from './ffmpeg.js';
import type { FormatChoice, YtDlpFormat } from './plan.js';

export interface SourceReadTools {
  ffprobe: string;
  socketTimeoutSeconds: number;
  /** The deployment's extra yt-dlp options (YTDLP_ARGS). */
  ytdlpArgs?: readonly string[];
}

/** How many times ffmpeg reconnects to a source that drops the connection, at most this many seconds apart. */
const RECONNECT_DELAY_MAX_SECONDS = 5;

/**
 * yt-dlp options that change how its downloader connects, which ffmpeg
 * would not follow: with any of them in YTDLP_ARGS, yt-dlp downloads.
 * (Headers, user agent and cookies given to yt-dlp reach ffmpeg through
 * the formats' http_headers.)
 */
const TRANSPORT_OPTIONS = [
  '--proxy', '--geo-verification-proxy', '--source-address', '-4', '-6', '--force-ipv4', '--force-ipv6', '--no-check-certificate',
  '--no-check-certificates', '--legacy-server-connect', '--prefer-insecure', '--client-certificate', '--impersonate', '--limit-rate', '-r',
  '--throttled-rate', '--downloader', '--external-downloader', '--hls-use-mpegts', '--http-chunk-size',
];

/** Whether the deployment's yt-dlp options leave the transport to yt-dlp alone. */
export function transportIsDefault(ytdlpArgs: readonly string[]): boolean {
  return !ytdlpArgs.some((a) => TRANSPORT_OPTIONS.some((o) => a === o || a.startsWith(`${o}=`) || (o.startsWith('--client-certificate') && a.startsWith(o))));
}

/**
 * A format ffmpeg can read as yt-dlp would. Left to yt-dlp: segmented
 * protocols (HLS, DASH: its downloader retries each fragment), formats with
 * downloader options (YouTube's chunked ranges, which its servers need to
 * serve at full speed) or cookies kept apart from the headers (newer
 * yt-dlp).
 */
export function readsDirectly(f: YtDlpFormat): boolean {
  return Boolean(f.url) && (f.protocol === 'http' || f.protocol === 'https')
    && f.fragments === undefined && f.downloader_options === undefined && f.cookies === undefined;
}

/** ffmpeg input options for a format's URL: its headers, a socket timeout, reconnects, HTTP(S) only. */
export function sourceInputArgs(f: YtDlpFormat, timeoutSeconds: number): string[] {
  return [
    // The URL comes from a web page: it must not make ffmpeg open a local file or another protocol.
    '-protocol_whitelist', 'http,https,tcp,tls',
    ...httpInputArgs(f.http_headers ?? {}, timeoutSeconds),
    // ffmpeg does not check certificates unless told (yt-dlp does); the system's CAs then apply.
    ...(f.protocol === 'https' ? ['-tls_verify', '1'] : []),
    // A dropped connection resumes with a range request, as yt-dlp's --retries would.
    '-reconnect', '1', '-reconnect_on_network_error', '1', '-reconnect_delay_max', String(RECONNECT_DELAY_MAX_SECONDS),
  ];
}

/**
 * The chosen formats as mux inputs read from their URLs (each probed there
 * by ffprobe, in parallel); undefined when any of them is not for reading
 * directly or cannot be probed, and the caller downloads with yt-dlp.
 */
export async function readableInputs(choice: FormatChoice, tools: SourceReadTools, signal?: AbortSignal): Promise<MuxInput[] | undefined> {
  if (!transportIsDefault(tools.ytdlpArgs ?? []) || !choice.formats.length || !choice.formats.every(readsDirectly)) return undefined;
  const inputs = await Promise.all(choice.formats.map(async (f): Promise<MuxInput | undefined> => {
    const inputArgs = sourceInputArgs(f, tools.socketTimeoutSeconds);
    const p = await ffprobe(tools.ffprobe, f.url!, signal, inputArgs);
    if (!p.ok) return undefined;
    return { path: f.url!, inputArgs, probed: p.probed, carriesAudio: f.format_id === choice.audioFrom };
  }));
  return inputs.every((i) => i !== undefined) ? (inputs as MuxInput[]) : undefined;
}
