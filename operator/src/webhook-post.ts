// One webhook POST and what the delivery log may keep of it. The connection
// goes through the outbound-address policy (lib/src/outbound.ts): an IP
// literal is checked before anything is opened, a name by connectLookup at
// connect time, so a receiver whose name resolves to a refused address is
// never contacted. Redirects are not followed (node:http never does). The
// outcome is a status or an error class, never an exception's text, and a
// short excerpt of the answer with anything secret-looking removed.
// Retries, signing and the log rows are operator/src/outbox.ts's.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { redactUrls } from '@mediajobs/lib/logger';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';

/** Bytes of a receiver's answer kept in the delivery log. */
export const EXCERPT_BYTES = 256;

export type PostError =
  | 'timeout' | 'connection_refused' | 'address_refused' | 'dns_failure' | 'connection_reset' | 'tls_error'
  | 'unreachable' | 'invalid_url' | 'connection_failed';

export interface PostOutcome {
  statusCode: number | null;
  /** Null for a 2xx; `HTTP <status>` for another status; else the error class. */
  error: string | null;
  excerpt: string | null;
  durationMs: number;
}

export interface PostTarget {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** Strings the excerpt must never show (the webhook URL itself). */
  secrets: readonly string[];
}

/** The policy's connect-time check, with keep-alive agents for each scheme. */
export class WebhookClient {
  private readonly lookup: LookupFunction;
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  constructor(private readonly policy: OutboundPolicy) {
    this.lookup = policy.connectLookup();
  }

  async post(target: PostTarget): Promise<PostOutcome> {
    const started = performance.now();
    const done = (o: Omit<PostOutcome, 'durationMs'>): PostOutcome => ({ ...o, durationMs: performance.now() - started });
    let url: URL;
    try {
      url = new URL(target.url);
    } catch {
      return done({ statusCode: null, error: 'invalid_url', excerpt: null });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return done({ statusCode: null, error: 'invalid_url', excerpt: null });
    // Node skips the lookup for an IP literal: the literal is checked here.
    if (!this.policy.checkUrl(url).ok) return done({ statusCode: null, error: 'address_refused', excerpt: null });
    const signal = AbortSignal.timeout(target.timeoutMs);
    try {
      const { status, head } = await this.send(url, target, signal);
      // The webhook URL without its query is as secret as with it (a token in the path).
      const excerpt = redactExcerpt(head, [...target.secrets, `${url.origin}${url.pathname}`]);
      return done({ statusCode: status, error: status >= 200 && status < 300 ? null : `HTTP ${status}`, excerpt });
    } catch (err) {
      return done({ statusCode: null, error: signal.aborted ? 'timeout' : errorClass(err), excerpt: null });
    }
  }

  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  /** The status and the first EXCERPT_BYTES of the body; the rest is not read. */
  private send(url: URL, target: PostTarget, signal: AbortSignal): Promise<{ status: number; head: Buffer }> {
    const https_ = url.protocol === 'https:';
    return new Promise((resolve, reject) => {
      const req = (https_ ? https : http).request(url, {
        method: 'POST',
        headers: { ...target.headers, 'Content-Length': String(Buffer.byteLength(target.body)) },
        agent: https_ ? this.agents.https : this.agents.http,
        lookup: this.lookup,
        signal,
      }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const finish = () => resolve({ status: res.statusCode ?? 0, head: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES) });
        res.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          size += chunk.length;
          if (size >= EXCERPT_BYTES) {
            finish();
            res.destroy();
          }
        });
        res.on('end', finish);
        // A body cut short (timeout, reset) still leaves the status that was received.
        res.on('error', finish);
      });
      req.on('error', reject);
      req.end(target.body);
    });
  }
}

const CODES: Readonly<Record<string, PostError>> = {
  ERR_OUTBOUND_REFUSED: 'address_refused',
  ECONNREFUSED: 'connection_refused',
  ENOTFOUND: 'dns_failure', EAI_AGAIN: 'dns_failure', EAI_NODATA: 'dns_failure', EAI_FAIL: 'dns_failure',
  ECONNRESET: 'connection_reset', EPIPE: 'connection_reset',
  EHOSTUNREACH: 'unreachable', ENETUNREACH: 'unreachable', ETIMEDOUT: 'timeout',
};

/** The class of a failed connection; the error's message (it names the host) is never kept. */
export function errorClass(err: unknown): PostError {
  const code = typeof (err as { code?: unknown } | null)?.code === 'string' ? (err as { code: string }).code : '';
  if (CODES[code]) return CODES[code];
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code)) return 'tls_error';
  return 'connection_failed';
}

/**
 * What the log keeps of an answer: printable text, the given secrets and
 * anything shaped like a signing secret or bearer token replaced, URL queries
 * dropped (lib/src/logger.ts redactUrls). Null for an empty body.
 */
export function redactExcerpt(head: Buffer, secrets: readonly string[]): string | null {
  if (!head.length) return null;
  // Queries first: a URL's query then no longer follows the secret URL it would be left behind by.
  let text = redactUrls(head.toString('utf8').replace(/[\p{Cc}\p{Cf}]+/gu, ' '));
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) if (s) text = text.split(s).join('[redacted]');
  return text.replace(/whsec_[A-Za-z0-9+/=]*/g, 'whsec_[redacted]').replace(/\b(Bearer|Basic)\s+[\w.~+/=-]+/gi, '$1 [redacted]');
}
