// Optional persistence under --state <dir>: a JSON snapshot of every object
// and the resourceVersion counter, written atomically shortly after changes
// and on stop. On load, pods that were running are marked Failed, as after
// the loss of their node, so their Jobs retry or fail by their own rules.
// The snapshot holds every Secret, so the folder is the cluster owner's alone
// (privateStateDir: 0700, its files 0600, looser modes left by an older
// version tightened) and each rewrite is made 0600 before it is renamed in.
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Store } from './store.js';
import { objectKey } from './store.js';
import type { KubeObject } from './types.js';
import { rfc3339 } from './object-meta.js';

interface Snapshot {
  version: 1;
  resourceVersion: number;
  objects: Record<string, KubeObject[]>;
}

const FILE = 'cluster-state.json';
const PODS_KEY = '/pods';

export class StatePersistence {
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly dir: string, private readonly store: Store, private readonly debounceMs = 250) {}

  /** Load a snapshot into an empty store; returns false when there is none. */
  load(nodeName: string): boolean {
    const path = join(this.dir, FILE);
    if (!existsSync(path)) return false;
    const snap = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
    for (const [typeKey, objects] of Object.entries(snap.objects)) {
      for (const obj of objects) {
        const restored = typeKey === PODS_KEY ? failIfRunning(obj, nodeName) : obj;
        this.store.load(typeKey, objectKey(obj.metadata.namespace, obj.metadata.name!), restored);
      }
    }
    // One bump past the snapshot: resourceVersions handed out before the restart stay unique.
    this.store.restoreResourceVersion(snap.resourceVersion + 1);
    return true;
  }

  start(): void {
    privateStateDir(this.dir);
    this.unsubscribe = this.store.subscribe(() => this.schedule());
  }

  /** Write now and stop watching for changes. */
  stop(): void {
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.save();
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.save();
    }, this.debounceMs);
    this.timer.unref();
  }

  save(): void {
    const objects: Record<string, KubeObject[]> = {};
    for (const typeKey of this.store.typeKeys()) objects[typeKey] = this.store.list(typeKey);
    const snap: Snapshot = { version: 1, resourceVersion: this.store.resourceVersion, objects };
    const path = join(this.dir, FILE);
    const tmp = `${path}.tmp`;
    // A temporary file a crash left behind keeps its old mode through writeFileSync: made anew instead.
    rmSync(tmp, { force: true });
    writeFileSync(tmp, JSON.stringify(snap), { mode: 0o600, flag: 'wx' });
    renameSync(tmp, path);
  }
}

/**
 * Make `dir` (the cluster's state: objects, its token secret, its serving
 * key) readable by its owner only: the folder 0700 and every file in it
 * 0600, whatever modes they had. Symbolic links are not followed.
 */
export function privateStateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  for (const name of readdirSync(dir)) {
    const file = join(dir, name);
    if (lstatSync(file).isFile()) chmodSync(file, 0o600);
  }
}

/** A pod whose process died with the previous run of the cluster is reported Failed, as after a node loss. */
function failIfRunning(pod: KubeObject, nodeName: string): KubeObject {
  const status = (pod.status ?? {}) as Record<string, unknown>;
  const spec = (pod.spec ?? {}) as Record<string, unknown>;
  if (!spec.nodeName || (status.phase !== 'Running' && status.phase !== 'Pending')) return pod;
  const now = rfc3339();
  const containerStatuses = ((status.containerStatuses as Record<string, unknown>[]) ?? []).map((cs) => {
    const running = (cs.state as Record<string, Record<string, unknown>> | undefined)?.running;
    return {
      ...cs, ready: false, started: false,
      state: { terminated: { exitCode: 137, reason: 'Error', message: 'The node was lost while the container was running', startedAt: running?.startedAt ?? now, finishedAt: now } },
    };
  });
  return {
    ...pod,
    status: {
      ...status, phase: 'Failed', reason: 'NodeLost',
      message: `Node ${nodeName} which was running pod ${pod.metadata.name} is unresponsive`,
      containerStatuses,
    },
  };
}
