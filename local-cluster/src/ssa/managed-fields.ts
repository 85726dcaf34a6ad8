// Field ownership, as kube-apiserver's field manager keeps it
// (k8s.io/apimachinery/pkg/util/managedfields/internal and
// structured-merge-diff's merge/update.go): every write records which
// manager set which fields in metadata.managedFields, and server-side apply
// merges by those records, answering 409 when it would change another
// manager's field. typed.ts walks values, merge.ts merges them; this module
// owns the managers, their identity, the conflict Status and the rules for
// managedFields a client sends.
import { StatusError } from '../errors.js';
import { deepEqual, isObject, rfc3339 } from '../object-meta.js';
import type { KubeObject, StatusCause } from '../types.js';
import { FieldSet, fieldPE, fromFieldsV1, pathString, toFieldsV1 } from './fieldset.js';
import { mergeValues, pruneUnowned } from './merge.js';
import { compare, toFieldSet, type TypeRef } from './typed.js';

type Operation = 'Apply' | 'Update';

interface Manager {
  manager: string;
  operation: Operation;
  apiVersion: string;
  subresource?: string;
  time?: string;
  set: FieldSet;
}

/** Who writes: the manager name, and the request's version and subresource. */
export interface Writer {
  manager: string;
  apiVersion: string;
  subresource?: 'status';
  /** Whether the resource has a status subresource: then only /status owns .status. */
  statusSubresource: boolean;
}

type Managers = Map<string, Manager>;

// Never part of anyone's set (stripmeta.go).
const STRIPPED = FieldSet.fromPaths([
  ['apiVersion'], ['kind'], ['metadata'],
  ...['name', 'namespace', 'creationTimestamp', 'selfLink', 'uid', 'clusterName', 'generation', 'managedFields', 'resourceVersion']
    .map((f) => ['metadata', f]),
].map((p) => p.map(fieldPE)));

/**
 * A manager's identity (BuildManagerIdentifier): appliers are one manager
 * whatever version they apply with; updaters are one per version.
 */
function identity(m: Pick<Manager, 'manager' | 'operation' | 'apiVersion' | 'subresource'>): string {
  return JSON.stringify([m.manager, m.operation, m.operation === 'Apply' ? '' : m.apiVersion, m.subresource ?? '']);
}

// Stored objects never change, so their managedFields are decoded once.
const decodedOnce = new WeakMap<object, Managers>();

/** Decodes managedFields; undefined when any entry is malformed (DecodeManagedFields). */
function decode(entries: unknown): Managers | undefined {
  if (entries === undefined || entries === null) return new Map();
  if (!Array.isArray(entries)) return undefined;
  let managers = decodedOnce.get(entries);
  if (!managers) {
    const parsed = parseEntries(entries);
    if (!parsed) return undefined;
    decodedOnce.set(entries, (managers = parsed));
  }
  // Callers replace sets and times; the cached managers stay as decoded.
  return new Map([...managers].map(([id, m]) => [id, { ...m }]));
}

function parseEntries(entries: unknown[]): Managers | undefined {
  const out: Managers = new Map();
  for (const e of entries) {
    if (!isObject(e) || (e.operation !== 'Apply' && e.operation !== 'Update')) return undefined;
    if (typeof e.apiVersion !== 'string' || !e.apiVersion || e.fieldsType !== 'FieldsV1') return undefined;
    let set: FieldSet;
    try {
      set = fromFieldsV1(e.fieldsV1 ?? {});
    } catch {
      return undefined;
    }
    const m: Manager = {
      manager: typeof e.manager === 'string' ? e.manager : '', operation: e.operation, apiVersion: e.apiVersion, set,
      subresource: typeof e.subresource === 'string' && e.subresource ? e.subresource : undefined,
      time: typeof e.time === 'string' ? e.time : undefined,
    };
    out.set(identity(m), m);
  }
  return out;
}

/** The managedFields entries, in the server's order: operation, time, manager, version, subresource. */
function encode(managers: Managers): Record<string, unknown>[] | undefined {
  const list = [...managers.values()].filter((m) => !m.set.empty());
  if (!list.length) return undefined;
  const seconds = (m: Manager) => (m.time ? Date.parse(m.time) / 1000 : 0);
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  list.sort((a, b) => cmp(a.operation, b.operation) || seconds(a) - seconds(b) || cmp(a.manager, b.manager)
    || cmp(a.apiVersion, b.apiVersion) || cmp(a.subresource ?? '', b.subresource ?? ''));
  return list.map((m) => {
    const e: Record<string, unknown> = { manager: m.manager, operation: m.operation, apiVersion: m.apiVersion };
    if (m.time) e.time = m.time;
    e.fieldsType = 'FieldsV1';
    e.fieldsV1 = toFieldsV1(m.set);
    if (m.subresource) e.subresource = m.subresource;
    return e;
  });
}

function setManagedFields(obj: KubeObject, managers: Managers): void {
  const entries = encode(managers);
  if (entries) obj.metadata.managedFields = entries;
  else delete obj.metadata.managedFields;
}

/** An object without its managedFields, for comparing and merging. */
function content(obj: KubeObject | undefined): Record<string, unknown> {
  if (!obj) return {};
  const { managedFields: _m, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

const STATUS = fieldPE('status');

/** The part of a set at or below one top-level field. */
function fieldOnly(set: FieldSet, pe: string): FieldSet {
  const out = new FieldSet();
  if (set.members.has(pe)) out.members.add(pe);
  const below = set.children.get(pe);
  if (below) out.children.set(pe, below);
  return out;
}

/** Reset fields (GetResetFields): the main resource never owns .status, /status owns nothing else. */
function visible(set: FieldSet, w: Writer): FieldSet {
  if (!w.statusSubresource) return set;
  const status = fieldOnly(set, STATUS);
  return w.subresource === 'status' ? status : set.difference(status);
}

/**
 * The managers a non-apply write starts from (decodeLiveOrNew): the request's
 * own managedFields when valid and non-empty; none when it sends an empty
 * list (or a list of one empty entry) to reset them; the live object's
 * otherwise, and always on a subresource.
 */
function startingManagers(live: KubeObject | undefined, sent: unknown, w: Writer): Managers {
  const liveManagers = () => decode(live?.metadata.managedFields) ?? new Map();
  if (w.subresource) return liveManagers();
  if (Array.isArray(sent) && (sent.length === 0 || (sent.length === 1 && isObject(sent[0]) && !Object.keys(sent[0]).length))) return new Map();
  // Most writes send back what they read: the live managers, already decoded.
  if (deepEqual(sent, live?.metadata.managedFields)) return liveManagers();
  const decoded = decode(sent);
  return decoded && decoded.size ? decoded : liveManagers();
}

/**
 * Records a create, update or patch (operation Update) on `next`: the writer
 * takes the fields it added or changed, from others too; removed fields leave
 * every set. `sent` is the managedFields the request carried.
 */
export function recordUpdate(live: KubeObject | undefined, next: KubeObject, sent: unknown, w: Writer, t: TypeRef): void {
  const managers = startingManagers(live, sent, w);
  // Through /status nothing but .status moves (commitUpdate copies the rest).
  const c = w.subresource === 'status'
    ? compare({ status: live?.status }, { status: next.status }, t)
    : compare(content(live), content(next), t);
  const taken = visible(c.added.union(c.modified), w);
  const removed = visible(c.removed, w);
  for (const m of managers.values()) m.set = m.set.difference(taken).difference(removed);
  const own = taken.difference(STRIPPED);
  if (!own.empty()) {
    const id = identity({ ...w, operation: 'Update' });
    const previous = managers.get(id);
    managers.set(id, {
      manager: w.manager || 'unknown', operation: 'Update', apiVersion: w.apiVersion, subresource: w.subresource,
      time: rfc3339(), set: own.union(previous?.set ?? new FieldSet()),
    });
  }
  // Managers left with nothing are gone before the cap counts them.
  for (const [id, m] of managers) if (m.set.empty()) managers.delete(id);
  capUpdaters(managers);
  setManagedFields(next, managers);
}

const MAX_UPDATERS = 10;

/**
 * At most ten Update entries (capmanagers.go): past that, the oldest are
 * merged, per version, into one "ancient-changes" entry that keeps the time
 * of the latest update merged into it.
 */
function capUpdaters(managers: Managers): void {
  const seconds = (m: Manager) => (m.time ? Math.floor(Date.parse(m.time) / 1000) : 0);
  const updaters = [...managers].filter(([, m]) => m.operation === 'Update')
    .sort(([ia, a], [ib, b]) => seconds(a) - seconds(b) || (ia < ib ? -1 : ia > ib ? 1 : 0));
  let count = updaters.length;
  const firstOfVersion = new Map<string, string>();
  for (const [id, m] of updaters) {
    if (count <= MAX_UPDATERS) break;
    const first = firstOfVersion.get(m.apiVersion);
    if (first === undefined) {
      firstOfVersion.set(m.apiVersion, id);
      continue;
    }
    const bucketId = identity({ manager: 'ancient-changes', operation: 'Update', apiVersion: m.apiVersion });
    if (id === bucketId) continue;
    if (!managers.has(bucketId)) {
      // The first old entry of the version becomes the bucket.
      managers.set(bucketId, { ...managers.get(first)!, manager: 'ancient-changes', subresource: undefined });
      managers.delete(first);
    }
    const bucket = managers.get(bucketId)!;
    managers.delete(id);
    managers.set(bucketId, { ...bucket, set: m.set.union(bucket.set), time: m.time });
    count--;
  }
}

/**
 * Server-side apply of `config` to `live` (undefined: the object does not
 * exist yet). Returns the object to store, its managedFields set; throws the
 * 409 apply conflict unless `force`.
 */
export function apply(live: KubeObject | undefined, config: KubeObject, w: Writer, force: boolean, t: TypeRef): KubeObject {
  const managers = decode(live?.metadata.managedFields) ?? new Map<string, Manager>();
  const before = content(live);
  const id = identity({ ...w, operation: 'Apply' });
  const previous = managers.get(id);
  managers.set(id, {
    manager: w.manager, operation: 'Apply', apiVersion: w.apiVersion, subresource: w.subresource,
    set: visible(toFieldSet(config, t), w), time: previous?.time,
  });

  let merged = mergeValues(before, config, t) as Record<string, unknown>;
  if (previous && !previous.set.empty()) {
    const owned = [...managers.values()].reduce((acc, m) => acc.union(m.set), new FieldSet());
    merged = pruneUnowned(merged, t, previous.set, owned) as Record<string, unknown>;
  }

  const c = compare(before, merged, t);
  takeFromOthers(managers, id, visible(c.added.union(c.modified), w), visible(c.removed, w), force);
  const mine = managers.get(id)!;
  mine.set = mine.set.difference(STRIPPED);
  if (!deepEqual(before, merged)) mine.time = rfc3339();

  const out = merged as KubeObject;
  out.metadata = isObject(out.metadata) ? out.metadata : {};
  setManagedFields(out, managers);
  return out;
}

/**
 * The applier's changes leave the other managers' sets (merge/update.go
 * update with force); without force, changing a field someone else owns is
 * the conflict. Removed fields leave every other set.
 */
function takeFromOthers(managers: Managers, applier: string, changed: FieldSet, removed: FieldSet, force: boolean): void {
  const others = [...managers].filter(([id]) => id !== applier).map(([, m]) => m);
  const conflicts = others.map((m): [Manager, FieldSet] => [m, m.set.intersection(changed)]).filter(([, lost]) => !lost.empty());
  if (conflicts.length && !force) throw conflictError(conflicts);
  for (const m of others) m.set = m.set.difference(changed).difference(removed);
}

// ---- the 409 (internal/conflict.go) ----------------------------------------------

function printManager(m: Manager): string {
  let s = JSON.stringify(m.manager);
  if (m.subresource) s += ` with subresource ${JSON.stringify(m.subresource)}`;
  // The identity a conflict names carries no time, so an updater prints "using <version>" only.
  return m.operation === 'Update' ? `${s} using ${m.apiVersion}` : s;
}

function conflictError(conflicts: [Manager, FieldSet][]): StatusError {
  const all = conflicts
    .sort(([a], [b]) => (identity(a) < identity(b) ? -1 : 1))
    .flatMap(([m, set]) => set.paths().map((p) => ({ m, path: pathString(p) })));
  const causes: StatusCause[] = all.map(({ m, path }) => ({ reason: 'FieldManagerConflict', message: `conflict with ${printManager(m)}`, field: path }));
  let message: string;
  if (all.length === 1) {
    message = `Apply failed with 1 conflict: conflict with ${printManager(all[0]!.m)}: ${all[0]!.path}`;
  } else {
    const lines: string[] = [];
    const byManager = new Map<string, string[]>();
    for (const { m, path } of all) byManager.set(printManager(m), [...(byManager.get(printManager(m)) ?? []), path]);
    // Go sorts the raw identifiers; printed names sort the same way for a given operation.
    for (const [name, paths] of [...byManager].sort(([a], [b]) => (a < b ? -1 : 1))) {
      lines.push(`conflicts with ${name}:`, ...paths.map((p) => `- ${p}`));
    }
    message = `Apply failed with ${all.length} conflicts: ${lines.join('\n')}`;
  }
  return new StatusError(409, 'Conflict', message, { causes });
}
