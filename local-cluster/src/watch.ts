// Watch streams: newline-delimited JSON events over a chunked 200 response,
// replayed from history after a resourceVersion or started with synthetic
// ADDED events, filtered by namespace and selectors (objects entering or
// leaving a selector become ADDED/DELETED), with bookmarks and timeouts; and
// the watch fault mode's drops, resets and expiries (watch-faults.ts).
import type { ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { ApiServer } from './apiserver.js';
import { storageKey } from './apiserver.js';
import { expired } from './errors.js';
import type { Matcher } from './selectors.js';
import type { StoredChange } from './store.js';
import { asPartialObjectMetadata, type PartialRequest } from './partial-metadata.js';
import { toTable } from './table.js';
import { TICK_MS, WatchFaultMode, type StreamFault, type WatchFaults } from './watch-faults.js';
import type { KubeObject, ResourceType, WatchEventType } from './types.js';

export interface WatchRequest {
  rt: ResourceType;
  namespace?: string;
  labels: Matcher;
  fields: Matcher;
  resourceVersion?: string;
  allowBookmarks: boolean;
  timeoutSeconds?: number;
  table: false | { includeObject?: 'None' | 'Metadata' | 'Object' };
  /** Metadata-only events (partial-metadata.ts): each object as PartialObjectMetadata. */
  partial?: PartialRequest;
}

export interface WatchSettings {
  bookmarkIntervalMs: number;
  /** A watcher that falls this far behind is closed, as the apiserver drops slow watchers. */
  maxBufferedBytes: number;
  /** Default stream lifetime when the client sets no timeoutSeconds (the apiserver picks 30-60 min). */
  defaultTimeoutMs: number;
}

/** What the hub can do to one open watch stream. */
interface OpenWatch {
  fault(kind: StreamFault): void;
  /** The bookmark interval changed: count it from now. */
  rescheduleBookmark(): void;
}

const WATCH_HEADERS = { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private', 'Transfer-Encoding': 'chunked' };

export class WatchHub {
  private readonly open = new Map<ServerResponse, OpenWatch>();
  private ticker: NodeJS.Timeout | undefined;

  constructor(
    private readonly api: ApiServer,
    private readonly settings: WatchSettings,
    /** The fault mode (off unless set); the LIST handler asks it for delays too. */
    readonly faults: WatchFaultMode = new WatchFaultMode(),
  ) {
    this.faultsChanged();
  }

  get size(): number {
    return this.open.size;
  }

  /** Close every open watch stream, as a dropped connection or apiserver restart would. */
  dropAll(): void {
    for (const res of this.open.keys()) res.destroy();
    this.open.clear();
  }

  /** Replace the fault mode's settings (undefined: off); open watches take the new bookmark interval at once. */
  setFaults(faults: WatchFaults | undefined): void {
    this.faults.set(faults);
    this.faultsChanged();
  }

  /** Drop every stream and stop the fault timer. */
  stop(): void {
    this.dropAll();
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = undefined;
  }

  private faultsChanged(): void {
    for (const w of this.open.values()) w.rescheduleBookmark();
    if (this.faults.streamFaultsOn && !this.ticker) {
      this.ticker = setInterval(() => this.tick(), TICK_MS);
      this.ticker.unref();
    } else if (!this.faults.streamFaultsOn && this.ticker) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  /** Each open watch, in the order they opened, gets one draw of the stream faults. */
  private tick(): void {
    for (const w of [...this.open.values()]) {
      const kind = this.faults.drawStreamFault();
      if (kind) w.fault(kind);
    }
  }

  serve(req: WatchRequest, res: ServerResponse): void {
    const { rt } = req;
    const sk = storageKey(rt);
    let first = true;
    let closed = false;
    /** Armed by a midEventReset: the next event line is cut and the connection reset. */
    let cutNext = false;
    let unsubscribe: () => void = () => {};
    const timers: NodeJS.Timeout[] = [];
    let bookmarkTimer: NodeJS.Timeout | undefined;
    const send = (type: WatchEventType, object: KubeObject | Record<string, unknown>): void => {
      if (closed) return;
      let payload: unknown = object;
      if (req.table && (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')) {
        payload = toTable(rt, [object as KubeObject], {
          includeObject: req.table.includeObject, columnDefinitions: first,
          resourceVersion: (object as KubeObject).metadata?.resourceVersion,
        });
        first = false;
      } else if (req.partial && type !== 'ERROR') {
        payload = asPartialObjectMetadata(req.partial, rt, object as KubeObject);
      }
      const line = JSON.stringify({ type, object: payload }) + '\n';
      if (cutNext) {
        cut(Buffer.from(line));
        return;
      }
      res.write(line);
      if (res.writableLength > this.settings.maxBufferedBytes) close();
    };
    const matches = (o: KubeObject | undefined): boolean =>
      !!o && (!req.namespace || o.metadata.namespace === req.namespace) && req.labels(o) && req.fields(o);
    const deliver = (c: StoredChange): void => {
      if (c.typeKey !== sk) return;
      if (c.type === 'DELETED') {
        if (matches(c.old)) send('DELETED', this.api.asVersion(rt, c.object));
        return;
      }
      const now = matches(c.object);
      const before = c.type === 'MODIFIED' && matches(c.old);
      if (now) {
        send(before ? 'MODIFIED' : 'ADDED', this.api.asVersion(rt, c.object));
      } else if (before) {
        // Left the selector: a DELETED event with the previous state at the new resourceVersion.
        const old = c.old!;
        send('DELETED', this.api.asVersion(rt, { ...old, metadata: { ...old.metadata, resourceVersion: c.object.metadata.resourceVersion } }));
      }
    };

    const rvParam = req.resourceVersion;
    const currentRv = this.api.store.resourceVersion;
    let replay: StoredChange[] | 'expired' = [];
    let initial: KubeObject[] = [];
    if (rvParam === undefined || rvParam === '' || rvParam === '0') {
      initial = this.api.store.list(sk, rt.namespaced ? req.namespace : undefined).filter(matches);
    } else {
      const rv = Number(rvParam);
      replay = Number.isFinite(rv) ? this.api.store.changesSince(rv, sk) : 'expired';
    }
    if (replay === 'expired') {
      const err = expired(`too old resource version: ${rvParam} (${this.api.store.oldestResumableRv})`);
      res.writeHead(200, WATCH_HEADERS);
      res.end(JSON.stringify({ type: 'ERROR', object: err.toStatus() }) + '\n');
      return;
    }
    // The fault mode's expiry: as the watch cache (an ERROR event in a 200 stream) or as storage refusing the watch (HTTP 410).
    const faultExpiry = this.faults.drawExpiry(rvParam, currentRv);
    if (faultExpiry) {
      const status = expired(`too old resource version: ${rvParam} (${currentRv})`).toStatus();
      if (faultExpiry === 'status') {
        const body = JSON.stringify(status);
        res.writeHead(410, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      } else {
        res.writeHead(200, WATCH_HEADERS);
        res.end(JSON.stringify({ type: 'ERROR', object: status }) + '\n');
      }
      return;
    }

    res.writeHead(200, WATCH_HEADERS);
    res.flushHeaders();
    const bookmark = () => {
      send('BOOKMARK', { kind: rt.kind, apiVersion: rt.group ? `${rt.group}/${rt.version}` : rt.version, metadata: { resourceVersion: String(this.api.store.resourceVersion) } });
    };
    const scheduleBookmark = (): void => {
      if (bookmarkTimer) clearTimeout(bookmarkTimer);
      bookmarkTimer = undefined;
      if (closed || !req.allowBookmarks) return;
      bookmarkTimer = setTimeout(() => {
        bookmark();
        scheduleBookmark();
      }, this.faults.bookmarkIntervalMs(this.settings.bookmarkIntervalMs));
      bookmarkTimer.unref();
    };
    const stopStream = (): void => {
      closed = true;
      for (const t of timers) clearTimeout(t);
      if (bookmarkTimer) clearTimeout(bookmarkTimer);
      unsubscribe();
      this.open.delete(res);
    };
    function close(): void {
      stopStream();
      if (!res.writableEnded) res.end();
    }
    /** Part of an event line, then (once it is on the wire) the connection reset, without the body's last chunk. */
    const cut = (line: Buffer): void => {
      stopStream();
      this.faults.record('midEventReset');
      res.write(line.subarray(0, Math.max(1, Math.floor(line.length / 2))), () => resetConnection(res));
    };
    this.open.set(res, {
      fault: (kind) => {
        if (closed) return;
        if (kind === 'midEventReset') {
          cutNext = true;
          return;
        }
        this.faults.record(kind);
        if (kind === 'drop') {
          close();
        } else {
          stopStream();
          resetConnection(res);
        }
      },
      rescheduleBookmark: scheduleBookmark,
    });

    // Subscribing and replaying in the same tick leaves no gap between history and live events.
    unsubscribe = this.api.store.subscribe(deliver);
    for (const o of initial) send('ADDED', this.api.asVersion(rt, o));
    for (const c of replay) deliver(c);

    scheduleBookmark();
    const timeoutMs = req.timeoutSeconds !== undefined ? req.timeoutSeconds * 1000 : this.settings.defaultTimeoutMs;
    const t = setTimeout(() => {
      if (req.allowBookmarks) bookmark();
      close();
    }, timeoutMs);
    t.unref();
    timers.push(t);
    res.on('close', () => {
      this.open.delete(res);
      close();
    });
  }
}

/**
 * End a connection with a TCP reset (RST), as a load balancer or a crashed
 * apiserver does: the client reads ECONNRESET. Under TLS the TCP socket is
 * the TLS socket's parent (an internal of node:tls); where it cannot be
 * reached the connection is destroyed instead (a FIN without the body's last
 * chunk: the client sees a broken stream either way).
 */
function resetConnection(res: ServerResponse): void {
  const socket = res.socket;
  const tcp = socket instanceof Socket
    ? (socket as unknown as { _handle?: { _parentWrap?: unknown } })._handle?._parentWrap ?? socket
    : undefined;
  if (tcp instanceof Socket && !tcp.destroyed) {
    try {
      tcp.resetAndDestroy();
    } catch {
      // Not a TCP handle (a pipe, a JS stream): destroyed below.
    }
  }
  res.destroy();
}
