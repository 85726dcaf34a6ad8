// The one way this project talks to the Kubernetes API: client-node's typed
// clients over a keep-alive transport (see KeepAliveHttpLibrary). The one
// exception is the runner's status patch inside a pod (ADR 0005).
import http from 'node:http';
import https from 'node:https';
import * as k8s from '@kubernetes/client-node';
import { TemporaryError } from './reconcile.js';

/**
 * The HTTP transport under client-node. Its default (node-fetch) gets a new
 * http(s).Agent from the KubeConfig on every call, i.e. a new TCP and TLS
 * connection per create; at hundreds of jobs per second the handshakes and
 * node-fetch's own overhead cost more than the create itself (measured:
 * about twice the gateway CPU per job). This sends through node:http with one
 * keep-alive agent built from the same TLS options (CA, client certificate)
 * the KubeConfig put on the per-call agent; authentication headers still
 * come from the KubeConfig on every call, so rotating tokens keep working.
 * Proxy agents are used as given.
 */
export class KeepAliveHttpLibrary implements k8s.PromiseHttpLibrary {
  private shared: http.Agent | undefined;

  constructor(private readonly maxSockets: number, private readonly timeoutMs: number) {}

  private agentFor(perCall: http.Agent | undefined): http.Agent | undefined {
    if (!perCall || (perCall.constructor !== http.Agent && perCall.constructor !== https.Agent)) return perCall;
    if (!this.shared) {
      const options = (perCall as http.Agent & { options?: http.AgentOptions }).options ?? {};
      const Ctor = perCall.constructor as typeof http.Agent;
      this.shared = new Ctor({ ...options, keepAlive: true, maxSockets: this.maxSockets });
    }
    if (perCall !== this.shared) perCall.destroy();
    return this.shared;
  }

  send(ctx: k8s.RequestContext): Promise<k8s.ResponseContext> {
    const body = ctx.getBody();
    if (body !== undefined && typeof body !== 'string') return Promise.reject(new Error('unsupported request body type'));
    const url = new URL(ctx.getUrl());
    const agent = this.agentFor(ctx.getAgent() as http.Agent | undefined);
    const request = url.protocol === 'https:' ? https.request : http.request;
    // Framed by its length whatever the method: node:http sends a DELETE's
    // body (DeleteOptions) unframed otherwise, and the API server reads the
    // DELETE without it and the body as a next request on the connection.
    const headers = body === undefined ? ctx.getHeaders() : { ...ctx.getHeaders(), 'Content-Length': String(Buffer.byteLength(body)) };
    return new Promise((resolve, reject) => {
      const req = request(url, { method: ctx.getHttpMethod(), headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const data = Buffer.concat(chunks);
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
          resolve(new k8s.ResponseContext(res.statusCode ?? 0, headers, { text: async () => data.toString('utf8'), binary: async () => data }));
        });
      });
      // An API server that stops answering must not hold a caller forever.
      req.setTimeout(this.timeoutMs, () => req.destroy(new Error(`Kubernetes API request timed out after ${this.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }
}

export interface KubeClientOptions {
  /** Keep-alive sockets to the API server. */
  maxSockets?: number;
  /** Abort a call with no response for this long; default KUBE_REQUEST_TIMEOUT_MS. */
  timeoutMs?: number;
}

/** How long a call to the API server may go without a response before it is abandoned. */
export const KUBE_REQUEST_TIMEOUT_MS = 30_000;

type ApiConstructor<T> = new (config: k8s.Configuration) => T;

/** A typed client (CustomObjectsApi, BatchV1Api, ...) for the KubeConfig's current cluster over one keep-alive agent. */
export function makeKubeClient<T>(kc: k8s.KubeConfig, Api: ApiConstructor<T>, transport: KeepAliveHttpLibrary): T {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const config = k8s.createConfiguration({
    baseServer: new k8s.ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    httpApi: k8s.wrapHttpLibrary(transport),
  });
  return new Api(config);
}

export function keepAliveTransport(opts: KubeClientOptions = {}): KeepAliveHttpLibrary {
  return new KeepAliveHttpLibrary(opts.maxSockets ?? 64, opts.timeoutMs ?? KUBE_REQUEST_TIMEOUT_MS);
}

/**
 * The KubeConfig of a process: the file named by its KUBECONFIG setting, or
 * client-node's default chain (KUBECONFIG env, ~/.kube/config, in-cluster).
 */
export function loadKubeConfig(path?: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}

/** client-node 1.x sends JSON patch unless told otherwise. */
export const MERGE_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

/** The HTTP status of a client-node ApiException, or undefined for other errors. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof k8s.ApiException ? err.code : undefined;
}

export function isNotFound(err: unknown): boolean {
  return apiStatus(err) === 404;
}

/** 409 with reason AlreadyExists (a create), as opposed to a Conflict (a stale resourceVersion). */
export function isAlreadyExists(err: unknown): boolean {
  return apiStatus(err) === 409 && String((err as k8s.ApiException<unknown>).body).includes('AlreadyExists');
}

export function isConflict(err: unknown): boolean {
  return apiStatus(err) === 409;
}

/**
 * How long a refused request asked to be left alone, from its Retry-After
 * header (seconds, or an HTTP date); undefined when it said nothing usable.
 */
export function retryAfterMs(err: unknown, now = Date.now()): number | undefined {
  if (!(err instanceof k8s.ApiException)) return undefined;
  const headers = (err as k8s.ApiException<unknown>).headers as Record<string, string> | undefined;
  const raw = headers && Object.entries(headers).find(([k]) => k.toLowerCase() === 'retry-after')?.[1];
  if (raw === undefined) return undefined;
  const value = raw.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** What a pass waits for when a 429 carried no usable Retry-After (kube-apiserver always sends one). */
const THROTTLED_DEFAULT_MS = 1_000;

/**
 * A 429 from the API server (API Priority and Fairness) as a TemporaryError
 * that waits what its Retry-After says, as client-go does, instead of the
 * work queue's backoff for failures, which grows past a minute while a busy
 * API server has room again after a second. Other errors are returned as
 * they are.
 */
export function waitIfThrottled(err: unknown): unknown {
  if (apiStatus(err) !== 429) return err;
  return new TemporaryError('the API server asked to wait (429)', retryAfterMs(err) ?? THROTTLED_DEFAULT_MS, { cause: err });
}
