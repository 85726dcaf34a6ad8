// The local cluster as a component: start() brings up the API server, the
// built-in controllers (garbage collector, Job controller, TTL controller) and
// the local kubelet on one loopback port, writes a kubeconfig, and stop()
// takes it all down cleanly.
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { chmodSync, mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { ApiServer } from './apiserver.js';
import { EventTtl } from './controllers/event-ttl.js';
import { JobController, TtlController } from './controllers/job-controller.js';
import { Kubelet } from './controllers/kubelet.js';
import { ClusterCredentials } from './credentials.js';
import { createHandler } from './http.js';
import { kubeconfigYaml, writeKubeconfig } from './kubeconfig.js';
import { StatePersistence, privateStateDir } from './persistence.js';
import { RbacAuthorizer } from './rbac.js';
import { WriteThrottle } from './throttle.js';
import { RequestCounter } from './request-counts.js';
import { WatchHub } from './watch.js';
import { checkWatchFaults, watchFaultsFromEnv, WatchFaultMode, type WatchFaultCounts, type WatchFaults } from './watch-faults.js';
import { guardRequest } from './request-guard.js';
import { servingCert, type ServingCert } from './serving-cert.js';
import { answerMalformedRequest, MAX_HEADER_BYTES } from './malformed-request.js';

export { ApiServer } from './apiserver.js';
export type { ClusterApi, Change } from './cluster-api.js';
export type { KubeObject, ResourceType } from './types.js';
export { kubeconfigYaml } from './kubeconfig.js';
export { WATCH_FAULTS_ENV, watchFaultsFromEnv } from './watch-faults.js';
export type { WatchFaults, WatchFaultCounts, ExpireForm } from './watch-faults.js';

export interface LocalClusterOptions {
  /** Loopback port; 0 (default) picks a free one. */
  port?: number;
  host?: string;
  /** Where to write the kubeconfig; default <workDir>/kubeconfig. */
  kubeconfigPath?: string;
  /**
   * Persist objects here and restore them on the next start. The cluster's
   * token secret is kept here too (else in workDir), so a restart keeps the
   * kubeconfig valid.
   */
  stateDir?: string;
  /** Scratch space for pods (volumes, termination logs, logs); default a new temp dir. */
  workDir?: string;
  /** Image → argv prefix for containers that name no command. */
  imageCommands?: Record<string, string[]>;
  /**
   * Environment every pod process gets beneath its own. KUBECONFIG is each
   * pod's own: its ServiceAccount's token, with that account's RBAC rights.
   */
  podEnv?: Record<string, string>;
  /** Cap on concurrently running pods (the node's capacity). */
  maxRunningPods?: number;
  /**
   * Run pod processes as their securityContext's users and groups (needs
   * root; default: on when running as root). See KubeletOptions.runAsPodUsers.
   */
  runAsPodUsers?: boolean;
  /** Base delay before a failed Job pod is replaced (real clusters: 10 s). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** How often an open watch that allows bookmarks gets one (real clusters: about a minute). */
  bookmarkIntervalMs?: number;
  /** Lifetime of a watch that sets no timeoutSeconds (real apiservers: a random 30-60 min). */
  watchTimeoutMs?: number;
  nodeName?: string;
  /**
   * Throttle writes (POST, PUT, PATCH, DELETE) past this many per second,
   * as API Priority and Fairness does: 429 with Retry-After (throttle.ts).
   * Unset: no throttle. Changed later with throttleWrites().
   */
  maxWritesPerSecond?: number;
  /** How long an Event lives after its last write (kube-apiserver's --event-ttl); default 1 h. */
  eventTtlMs?: number;
  /**
   * The watch fault mode (watch-faults.ts): random drops, resets and 410
   * expiries of watches, slow LISTs, a bookmark interval. Unset: from the
   * environment variable LOCAL_CLUSTER_WATCH_FAULTS (unset there too: off);
   * `false`: off whatever the environment says. Changed later with
   * setWatchFaults().
   */
  watchFaults?: WatchFaults | false;
  logger?: Logger;
}

export class LocalCluster {
  /**
   * Every TCP connection, one still in its TLS handshake included:
   * closeAllConnections() knows only those that reached HTTP, and close()
   * waits for the rest (a handshake left hanging held a restart for half a minute).
   */
  private readonly sockets = new Set<Socket>();

  private constructor(
    readonly api: ApiServer,
    private readonly server: Server,
    readonly watches: WatchHub,
    readonly kubelet: Kubelet,
    private readonly controllers: { stop(): void }[],
    private readonly persistence: StatePersistence | undefined,
    readonly url: string,
    readonly kubeconfigPath: string,
    readonly workDir: string,
    private readonly credentials: ClusterCredentials,
    private readonly tls: ServingCert,
    private readonly throttleRef: { current: WriteThrottle | undefined },
    private readonly counter: RequestCounter,
  ) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  static async start(opts: LocalClusterOptions = {}): Promise<LocalCluster> {
    // Checked first, so that a bad LOCAL_CLUSTER_WATCH_FAULTS stops the start before anything is made.
    const faultSettings = opts.watchFaults === false ? undefined : opts.watchFaults ? checkWatchFaults(opts.watchFaults) : watchFaultsFromEnv();
    const logger = opts.logger ?? pino({ name: 'local-cluster', level: process.env.LOG_LEVEL ?? 'info' });
    const workDir = opts.workDir ?? mkdtempSync(join(tmpdir(), 'local-cluster-'));
    mkdirSync(workDir, { recursive: true });
    // Ours when made here: searchable, so that pods running as other users reach their directories.
    if (!opts.workDir) chmodSync(workDir, 0o711);
    const nodeName = opts.nodeName ?? 'local-node';

    const host = opts.host ?? '127.0.0.1';
    // The state (every Secret, the token secret, the serving key) is the owner's alone, tightened if an older run left it open.
    if (opts.stateDir) privateStateDir(opts.stateDir);
    const credentials = ClusterCredentials.forDir(opts.stateDir ?? workDir);
    const tls = servingCert(opts.stateDir ?? workDir, host);
    if (opts.stateDir) privateStateDir(opts.stateDir);
    const api = new ApiServer();
    let persistence: StatePersistence | undefined;
    if (opts.stateDir) {
      persistence = new StatePersistence(opts.stateDir, api.store);
      if (persistence.load(nodeName)) {
        api.registerStoredCrds();
        api.gc.rebuild();
        logger.info({ stateDir: opts.stateDir, resourceVersion: api.store.resourceVersion }, 'restored cluster state');
      }
      persistence.start();
    }
    api.bootstrap();

    const kubeconfigPath = opts.kubeconfigPath ?? join(workDir, 'kubeconfig');
    // A real pod reaches its API server through in-cluster config and its account's token; a local process gets a kubeconfig with that token.
    const served = { url: '' };
    const kubelet = new Kubelet(api, {
      workDir: join(workDir, 'pods'), imageCommands: opts.imageCommands, maxRunningPods: opts.maxRunningPods, nodeName, env: opts.podEnv ?? {},
      runAsPodUsers: opts.runAsPodUsers, serviceAccountToken: (ns, sa) => credentials.serviceAccountToken(ns, sa),
      podKubeconfig: (ns, sa) => kubeconfigYaml(served.url, credentials.serviceAccountToken(ns, sa), tls.cert, ns),
      logger: (msg, extra, level = 'warn') => logger[level](extra ?? {}, msg),
    });
    const jobs = new JobController(api, { backoffBaseMs: opts.backoffBaseMs, backoffMaxMs: opts.backoffMaxMs });
    const ttl = new TtlController(api);
    const eventTtl = new EventTtl(api, opts.eventTtlMs);
    const watches = new WatchHub(api, {
      bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000,
      maxBufferedBytes: 64 * 1024 * 1024,
      defaultTimeoutMs: opts.watchTimeoutMs ?? 45 * 60_000,
    }, new WatchFaultMode(faultSettings));
    if (watches.faults.settings) logger.warn({ watchFaults: watches.faults.settings }, 'watch fault mode on: watches are dropped, reset and expired at random');
    const throttleRef = { current: opts.maxWritesPerSecond ? new WriteThrottle(opts.maxWritesPerSecond) : undefined };
    const counter = new RequestCounter();
    const authorizer = new RbacAuthorizer(api);
    const server = createServer({ key: tls.key, cert: tls.cert, keepAliveTimeout: 60_000, maxHeaderSize: MAX_HEADER_BYTES }, createHandler({
      api, watches, logs: kubelet, throttle: () => throttleRef.current, counter, listDelayMs: () => watches.faults.listDelayMs(),
      guard: (req) => guardRequest(req, { credentials, authorizer, listenHost: host }), authorizer,
      onError: (err, req) => logger.error({ err, method: req.method, url: req.url }, 'request failed'),
    }));
    server.on('clientError', answerMalformedRequest);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, host, () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    const url = `https://${host}:${port}`;
    served.url = url;
    writeKubeconfig(kubeconfigPath, url, credentials.adminToken, tls.cert);

    jobs.start();
    ttl.start();
    eventTtl.start();
    kubelet.start();
    logger.info({ url, kubeconfig: kubeconfigPath }, 'local cluster listening');
    return new LocalCluster(api, server, watches, kubelet, [jobs, ttl, eventTtl, api.gc], persistence, url, kubeconfigPath, workDir, credentials, tls, throttleRef, counter);
  }

  /**
   * The bearer token of the kubeconfig, for raw HTTP requests (tests: support.ts
   * clusterFetch). Requests without it are system:anonymous; with another, 401.
   */
  get token(): string {
    return this.credentials.adminToken;
  }

  /** The bearer token of a ServiceAccount (the one the kubelet gives its pods): authenticated as it, authorized by RBAC. */
  serviceAccountToken(namespace: string, name: string): string {
    return this.credentials.serviceAccountToken(namespace, name);
  }

  /**
   * Write a kubeconfig (0600) that authenticates as a ServiceAccount, for a
   * component run outside the cluster with that account's rights only (local
   * mode's operator and gateway); returns its path.
   */
  writeServiceAccountKubeconfig(path: string, namespace: string, name: string): string {
    writeKubeconfig(path, this.url, this.serviceAccountToken(namespace, name), this.tls.cert, namespace);
    return path;
  }

  /** The PEM certificate the cluster serves, which a raw HTTPS client must trust (the kubeconfig's certificate-authority-data). */
  get caCert(): string {
    return this.tls.cert;
  }

  /** Throttle writes past this many per second (APF's 429 with Retry-After), or stop throttling (undefined). */
  throttleWrites(perSecond: number | undefined): void {
    this.throttleRef.current = perSecond ? new WriteThrottle(perSecond) : undefined;
  }

  /** Writes the throttle has turned away since it was last set. */
  get throttledWrites(): number {
    return this.throttleRef.current?.rejected ?? 0;
  }

  /**
   * HTTP requests served since start (or the last resetRequestCounts), as
   * "verb resource" → count, e.g. "patch mediajobs.mediajobs.io/status"
   * (request-counts.ts). The built-in controllers' own writes are not
   * requests; subscribe to api for those. The same requests with their
   * HTTP codes, in kube-apiserver's labels, are GET /metrics'
   * apiserver_request_total (metrics.ts).
   */
  requestCounts(): Record<string, number> {
    return this.counter.snapshot();
  }

  /**
   * requestCounts() per authenticated user: "system:serviceaccount:<ns>:<name>",
   * the administrator ("local-cluster-admin") or "system:anonymous" →
   * "verb resource" → count. What each component asked of the API, for a
   * comparison with its Role.
   */
  requestCountsByUser(): Record<string, Record<string, number>> {
    return this.counter.snapshotByUser();
  }

  /** The requests RBAC refused, per user, named as requestCountsByUser() names them (non-resource ones "verb /path"). */
  refusedRequestsByUser(): Record<string, Record<string, number>> {
    return this.counter.refusedByUser();
  }

  /** Start requestCounts() and /metrics' apiserver_request_total over (the latter as a restart does). */
  resetRequestCounts(): void {
    this.counter.reset();
  }

  /**
   * Set the watch fault mode (undefined or {}: off), replacing the settings
   * in force; the PRNG restarts from `seed` (a random one when none is given).
   * Open watches keep running and take the new rates and bookmark interval at
   * once. A bad value throws, naming the setting.
   */
  setWatchFaults(faults: WatchFaults | undefined): void {
    this.watches.setFaults(faults);
  }

  /** The watch fault settings in force, with the seed in use; undefined when the mode is off. */
  get watchFaults(): Readonly<WatchFaults & { seed: number }> | undefined {
    return this.watches.faults.settings;
  }

  /** What the fault mode has done since start or resetWatchFaultCounts(): drops, resets, midEventResets, expiries, delayedLists. */
  get watchFaultCounts(): WatchFaultCounts {
    return this.watches.faults.counters;
  }

  resetWatchFaultCounts(): void {
    this.watches.faults.resetCounts();
  }

  /** Drop all watch history, as an etcd compaction: resuming from an older resourceVersion gets 410 Expired. */
  compactHistory(): void {
    this.api.store.compact();
  }

  /** Close every open watch connection, as a network drop would. */
  dropWatches(): void {
    this.watches.dropAll();
  }

  /**
   * Restart the API server with its state kept, as a kube-apiserver restart
   * over the same etcd: every connection and watch dropped, nothing
   * listening on the port for `downMs`, then the same URL again with a
   * fresh watch cache (a watch resumed from before the restart gets 410
   * Expired, so clients relist), and /metrics' request counter from zero.
   * The kubelet, the controllers and the pods run on, as they do in a
   * cluster when only its API server restarts.
   */
  async restartApiServer(downMs: number): Promise<void> {
    const { port, address } = this.server.address() as AddressInfo;
    await this.closeServer();
    // A new kube-apiserver process: its counters start from zero (requestCounts() keeps counting).
    this.counter.resetSeries();
    this.api.store.compact();
    await new Promise((r) => setTimeout(r, downMs));
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, address, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    for (const c of this.controllers) c.stop();
    await this.kubelet.stop();
    await this.closeServer();
    this.watches.stop();
    this.persistence?.stop();
  }

  /** Stop listening and end every connection, watches first. */
  private async closeServer(): Promise<void> {
    this.watches.dropAll();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

export function startLocalCluster(opts: LocalClusterOptions = {}): Promise<LocalCluster> {
  return LocalCluster.start(opts);
}
