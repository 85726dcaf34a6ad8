// The one logger: pino, with every secret-bearing field redacted wherever it
// appears, so an API key, a credential or a webhook address never reaches a log.
// It also owns the lines' format (LOG_FORMAT): JSON lines for machines, human
// lines (pino-pretty) for a person at a terminal.
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { isColorSupported, prettyFactory } from 'pino-pretty';
import { commonSchema, type LogFormat } from './config.js';

export type { Logger } from 'pino';

/** Field names whose values are secrets, at any depth. */
export const SECRET_FIELDS = [
  'x-api-key', 'apiKey', 'api_key', 'authorization', 'cookie',
  'secret_key', 'secretKey', 'access_key', 'accessKey', 'account_key', 'accountKey',
  'access_key_secret', 'accessKeySecret', 'access_key_id', 'accessKeyId',
  'service_account_json', 'serviceAccountJson', 'private_key', 'privateKey',
  'webhook_url', 'webhookUrl', 'password', 'token', 'storage', 'credentials', 'signature', 'sig',
];

const SECRET_KEYS = new Set(SECRET_FIELDS.map((f) => f.toLowerCase()));
const CENSOR = '[redacted]';

/**
 * A copy of `value` with every secret-named field censored, at any depth.
 * pino's own `redact` with wildcard paths cost about 50 µs a line (a quarter
 * of the gateway's CPU under load); one walk with a Set lookup costs about 1
 * µs. Only plain objects and arrays are walked (errors and buffers are left
 * to their serializers), and nothing the caller passed is modified.
 */
export function redactSecrets(value: unknown, depth = 0): unknown {
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    value.forEach((v, i) => {
      const r = redactSecrets(v, depth + 1);
      if (r !== v) (out ??= value.slice())[i] = r;
    });
    return out ?? value;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value)) {
    const r = SECRET_KEYS.has(k.toLowerCase()) ? CENSOR : redactSecrets(v, depth + 1);
    if (r !== v) (out ??= { ...(value as Record<string, unknown>) })[k] = r;
  }
  return out ?? value;
}

/** Schemes whose URLs may carry credentials or signed queries: the web's, proxies', and the streams yt-dlp and ffmpeg read. */
const URL_SCHEMES = 'https?|s?ftp|wss?|rtmp[st]?e?|rtsps?|mms[ht]?|socks[45]h?';
const URL_USERINFO = new RegExp(`\\b(${URL_SCHEMES}):\\/\\/[^\\s/?#'"<>]*@`, 'gi');
const URL_QUERY = new RegExp(`\\b((?:${URL_SCHEMES}):\\/\\/[^\\s?#'"<>]+)[?#][^\\s'"<>]*`, 'gi');

/**
 * URLs in a text without their user:password and their query strings and
 * fragments, so neither credentials nor signed URLs reach a log. The
 * userinfo runs to the authority's last `@`, as a URL parser reads it: a
 * password holding an unescaped `@` is dropped whole, not cut at its first.
 */
export function redactUrls(text: string): string {
  return text
    .replace(URL_USERINFO, '$1://')
    .replace(URL_QUERY, '$1?…');
}

/**
 * An error as log fields: name, code, HTTP status and reason, and a short
 * message with URLs stripped of their queries. Never a response body:
 * client-node's ApiException carries the API server's whole answer (which
 * can echo a Secret or a spec) in its body and its message, so for those the
 * message is left out and only the Status reason is kept.
 */
export function errFields(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: redactUrls(String(err)).slice(0, 200) };
  const e = err as Error & { code?: unknown; status?: unknown; statusCode?: unknown; reason?: unknown; body?: unknown; $metadata?: { httpStatusCode?: unknown } };
  const out: Record<string, unknown> = { name: e.name };
  const apiException = e.name === 'ApiException' || (typeof e.code === 'number' && 'body' in e && 'headers' in e);
  if (e.code !== undefined && !apiException) out.code = e.code;
  const status = apiException ? e.code : (e.status ?? e.statusCode ?? e.$metadata?.httpStatusCode);
  if (typeof status === 'number') out.status = status;
  const reason = apiException ? statusReason(e.body) : e.reason;
  if (typeof reason === 'string') out.reason = reason;
  if (!apiException) out.message = redactUrls(e.message).slice(0, 200);
  return out;
}

/** The `reason` of a Kubernetes Status body, as client-node hands it over (string or parsed). */
function statusReason(body: unknown): string | undefined {
  try {
    const parsed = typeof body === 'string' ? (JSON.parse(body) as unknown) : body;
    const reason = (parsed as { reason?: unknown } | null)?.reason;
    return typeof reason === 'string' ? reason : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A logger named after its component. Without a `destination` it writes to
 * standard output in the format LOG_FORMAT chooses (logFormatOf); a given
 * destination gets JSON lines, as tests and pipes that read them expect.
 */
export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info', options: LoggerOptions = {}, destination?: DestinationStream): Logger {
  const opts: LoggerOptions = {
    name,
    level,
    formatters: { log: (obj) => redactSecrets(obj) as Record<string, unknown> },
    ...options,
  };
  return pino(opts, destination ?? stdoutDestination());
}

/**
 * The format LOG_FORMAT asks for on an output that is or is not a terminal:
 * `auto` (and a value the service's config check will refuse at start) is
 * human lines on a terminal only, so whatever reads a pipe or a file (a log
 * shipper, `kubectl logs`, a test) keeps getting one JSON object a line.
 */
export function logFormatOf(setting: string | undefined, isTerminal: boolean): Exclude<LogFormat, 'auto'> {
  const parsed = commonSchema.shape.LOG_FORMAT.safeParse(setting);
  const format = parsed.success ? parsed.data : 'auto';
  if (format === 'auto') return isTerminal ? 'pretty' : 'json';
  return format;
}

let stdoutStream: DestinationStream | undefined;

/** Standard output in this process's format, chosen once: every logger of the process writes the same way. */
function stdoutDestination(): DestinationStream {
  stdoutStream ??= logFormatOf(process.env.LOG_FORMAT, process.stdout.isTTY === true) === 'pretty' ? humanLines(STDOUT) : STDOUT;
  return stdoutStream;
}

/**
 * A destination that turns each JSON line into a human one before `out`:
 * `[09:41:07.512] INFO (operator): job completed jobId=… size=12.4 MB`,
 * local time, level, component, message, then the fields as key=value on
 * the same line (nested ones dotted: err.code=ECONNRESET), a stack on the
 * lines below. Colours only where the terminal takes them. It formats
 * what pino wrote, after redaction, so a secret is as censored here as in
 * JSON. Synchronous, on the logging thread: a person reads far fewer lines
 * a second than that costs, and a fatal line before exit is never lost in
 * a worker.
 */
export function humanLines(out: DestinationStream, colorize = isColorSupported): DestinationStream {
  const pretty = prettyFactory({
    colorize,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    hideObject: true,
    errorLikeObjectKeys: [],
    messageFormat: (log, messageKey) => {
      const { [messageKey]: msg, level: _l, time: _t, name: _n, pid: _p, hostname: _h, ...fields } = log;
      const stacks: string[] = [];
      const text = keyValues(fields, '', stacks).join(' ');
      return [typeof msg === 'string' ? msg : '', text].filter(Boolean).join(' ') + stacks.map((s) => `\n    ${s.replace(/\n/g, '\n    ')}`).join('');
    },
  });
  // Nothing for nothing: a streamWrite hook that keeps its lines (tests' captureLogger) passes on ''.
  return { write: (line: string) => void (line && out.write(pretty(line))) };
}

/** `fields` as key=value words, nested objects dotted, strings quoted only when they hold spaces or quotes; stacks set aside. */
function keyValues(fields: Record<string, unknown>, prefix: string, stacks: string[]): string[] {
  const words: string[] = [];
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    const key = prefix + k;
    // pino's err serializer dresses a plain object (errFields') as an Error of type Object with no stack.
    if (k === 'stack' && typeof v === 'string') {
      if (v) stacks.push(v);
    } else if (k === 'type' && v === 'Object' && prefix) continue;
    else if (v !== null && typeof v === 'object' && !Array.isArray(v)) words.push(...keyValues(v as Record<string, unknown>, `${key}.`, stacks));
    else words.push(`${key}=${typeof v === 'string' && /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v)}`);
  }
  return words;
}

/**
 * Standard output, written asynchronously: a line goes out at once when no
 * write is pending, and lines logged meanwhile leave together in the next
 * write, so a busy gateway makes one write call per batch rather than per
 * line (about 3% of its CPU at 1,000 requests/s). pino flushes what is
 * buffered when the process exits, also on a fatal error or a signal.
 */
const STDOUT = pino.destination({ dest: 1, sync: false });
