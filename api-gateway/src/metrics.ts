// The gateway's Prometheus metrics (docs/metrics.md): HTTP requests by
// route template, method and status with their latency, jobs accepted,
// cancellations through the API, rate-limit checks and refusals, and its
// Postgres pool. Registered in the registry the gateway is given (in local
// mode the operator's metrics are in it too), served at GET /metrics by a
// listener of their own (METRICS_PORT, serveMetrics), never on the API's port.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type pg from 'pg';
import {
  Counter, Histogram, PREFIX, SHORT_SECONDS, jobsAccepted, jobsFinished, sendMetrics, trackPool, type JobSource, type Registry,
} from '@mediajobs/lib/metrics';
import { SECURITY_HEADERS } from './security-headers.js';

/** Methods counted by name; any other is `other`, so a client cannot make up label values. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** The route of a request that matched none (404s, and what was answered before routing outside the authenticated prefixes). */
export const UNMATCHED = 'unmatched';

export class GatewayMetrics {
  private readonly requests: Counter<'route' | 'method' | 'status'>;
  private readonly latency: Histogram<'route' | 'method'>;
  private readonly accepted: Counter<'source'>;
  private readonly finished: Counter<'status' | 'error_category'>;
  private readonly rateLimited: Counter<'counter' | 'verdict'>;
  private readonly rateChecks: Histogram<'counter'>;
  private readonly insertStatements: Histogram;

  constructor(readonly registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: `${PREFIX}http_requests_total`, help: 'HTTP requests answered, by route template, method and status code',
      labelNames: ['route', 'method', 'status'] as const, registers,
    });
    this.latency = new Histogram({
      name: `${PREFIX}http_request_duration_seconds`, help: 'Time from a request arriving to its answer being sent, by route template and method',
      labelNames: ['route', 'method'] as const, buckets: SHORT_SECONDS, registers,
    });
    this.accepted = jobsAccepted(registry);
    this.finished = jobsFinished(registry);
    this.rateLimited = new Counter({
      name: `${PREFIX}rate_limit_rejections_total`,
      help: 'Requests refused by the rate limit: 429 (limited) or 503 (unavailable: the shared counter could not be reached)',
      labelNames: ['counter', 'verdict'] as const, registers,
    });
    this.rateChecks = new Histogram({
      name: `${PREFIX}rate_limit_check_duration_seconds`, help: 'Time the rate limit took to count one request (what it adds to its latency)',
      labelNames: ['counter'] as const, buckets: [0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.5], registers,
    });
    this.insertStatements = new Histogram({
      name: `${PREFIX}job_insert_statement_jobs`,
      help: 'Jobs of POST /jobs written by one insert statement: the requests of one event-loop turn share one (ADR 0025)',
      buckets: [1, 2, 4, 8, 16, 32, 64], registers,
    });
  }

  /**
   * Express middleware, first in the chain: times every request and counts
   * it by route template at its end. `prefixes`: the authenticated mount
   * paths (app.ts), the route of a request answered under one before any
   * route matched (401, 429).
   */
  middleware(prefixes: readonly string[]): RequestHandler {
    return (req: Request, res: Response, next: NextFunction) => {
      const start = process.hrtime.bigint();
      res.once('finish', () => {
        const seconds = Number(process.hrtime.bigint() - start) / 1e9;
        const route = routeOf(req, prefixes);
        const method = METHODS.has(req.method) ? req.method : 'other';
        this.requests.inc({ route, method, status: String(res.statusCode) });
        this.latency.observe({ route, method }, seconds);
      });
      next();
    };
  }

  trackPool(pool: pg.Pool): void {
    trackPool(this.registry, 'gateway', pool);
  }

  jobsAccepted(source: JobSource, n = 1): void {
    if (n > 0) this.accepted.inc({ source }, n);
  }

  /** Jobs the API cancelled (their rows became Cancelled here). */
  jobsCancelled(n = 1): void {
    if (n > 0) this.finished.inc({ status: 'Cancelled', error_category: 'none' }, n);
  }

  /** One insert statement of POST /jobs, with the jobs it wrote or tried to. */
  jobInsertStatement(jobs: number): void {
    this.insertStatements.observe(jobs);
  }

  rateCheck(counter: string, seconds: number, verdict: 'allowed' | 'limited' | 'unavailable'): void {
    this.rateChecks.observe({ counter }, seconds);
    if (verdict !== 'allowed') this.rateLimited.inc({ counter, verdict });
  }
}

/**
 * The route template that answered (mount path and route path, e.g.
 * /jobs/:id), never the URL; under an authenticated prefix, a request
 * answered before any route matched (401, 429) is `<prefix>/*`, the prefix
 * matched as express mounts it (case-insensitive, whole segments).
 */
function routeOf(req: Request, prefixes: readonly string[]): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  if (typeof path === 'string') return req.baseUrl + path;
  const url = req.originalUrl.split('?', 1)[0]!.toLowerCase();
  const prefix = prefixes.find((p) => url === p || url.startsWith(`${p}/`));
  return prefix ? `${prefix}/*` : UNMATCHED;
}

/**
 * The metrics listener (METRICS_PORT): GET /metrics and nothing else, on a
 * port of its own, so the API's port (the one an ingress and the runners'
 * upload grants reach) never serves it, and a NetworkPolicy or a Service can
 * keep it for Prometheus. Resolves once it listens.
 */
export async function serveMetrics(registry: Registry, host: string, port: number): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    if ((req.method === 'GET' || req.method === 'HEAD') && req.url?.split('?')[0] === '/metrics') {
      sendMetrics(registry, res).catch(() => {
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
      return;
    }
    res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: 'Not found' }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return { server, url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host}:${bound}` };
}
