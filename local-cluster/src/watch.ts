// Watch streams: newline-delimited JSON events over a chunked 200 response,
// replayed from history after a resourceVersion or started with synthetic
// ADDED events, filtered by namespace and selectors (objects entering or
// leaving a selector become ADDED/DELETED), with bookmarks and timeouts.
import type { ServerResponse } from 'node:http';
import type { ApiServer } from './apiserver.js';
import { storageKey } from './apiserver.js';
import { expired } from './errors.js';
import type { Matcher } from './selectors.js';
import type { StoredChange } from './store.js';
import { asPartialObjectMetadata, type PartialRequest } from './partial-metadata.js';
import { toTable } from './table.js';
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

export class WatchHub {
  private readonly open = new Set<ServerResponse>();

  constructor(private readonly api: ApiServer, private readonly settings: WatchSettings) {}

  get size(): number {
    return this.open.size;
  }

  /** Close every open watch stream, as a dropped connection or apiserver restart would. */
  dropAll(): void {
    for (const res of this.open) res.destroy();
    this.open.clear();
  }

  serve(req: WatchRequest, res: ServerResponse): void {
    const { rt } = req;
    const sk = storageKey(rt);
    let first = true;
    let closed = false;
    let unsubscribe: () => void = () => {};
    const timers: NodeJS.Timeout[] = [];
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
      res.write(JSON.stringify({ type, object: payload }) + '\n');
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

    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    this.open.add(res);

    const rvParam = req.resourceVersion;
    let replay: StoredChange[] | 'expired' = [];
    let initial: KubeObject[] = [];
    if (rvParam === undefined || rvParam === '' || rvParam === '0') {
      initial = this.api.store.list(sk, rt.namespaced ? req.namespace : undefined).filter(matches);
    } else {
      const rv = Number(rvParam);
      replay = Number.isFinite(rv) ? this.api.store.changesSince(rv, sk) : 'expired';
      if (replay === 'expired') {
        const err = expired(`too old resource version: ${rvParam} (${this.api.store.oldestResumableRv})`);
        res.end(JSON.stringify({ type: 'ERROR', object: err.toStatus() }) + '\n');
        this.open.delete(res);
        return;
      }
    }
    // Subscribing and replaying in the same tick leaves no gap between history and live events.
    unsubscribe = this.api.store.subscribe(deliver);
    for (const o of initial) send('ADDED', this.api.asVersion(rt, o));
    for (const c of replay) deliver(c);

    const bookmark = () => {
      send('BOOKMARK', { kind: rt.kind, apiVersion: rt.group ? `${rt.group}/${rt.version}` : rt.version, metadata: { resourceVersion: String(this.api.store.resourceVersion) } });
    };
    function close(): void {
      closed = true;
      for (const t of timers) clearTimeout(t);
      unsubscribe();
      if (!res.writableEnded) res.end();
    }
    if (req.allowBookmarks) {
      const t = setInterval(bookmark, this.settings.bookmarkIntervalMs);
      t.unref();
      timers.push(t);
    }
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
