// Sets of field paths, as structured-merge-diff's fieldpath.Set: what one
// manager owns. A path element is kept in its FieldsV1 spelling ("f:name",
// "k:{...}", "v:...", "i:0"), so managedFields encode and decode without a
// second representation. This module owns the set algebra, the FieldsV1
// codec and the ".spec.containers[name=\"x\"]" path text of conflict messages.

/** A node of the set: elements that are members here, and the sets below elements. */
export class FieldSet {
  readonly members = new Set<string>();
  readonly children = new Map<string, FieldSet>();

  static fromPaths(paths: readonly (readonly string[])[]): FieldSet {
    const s = new FieldSet();
    for (const p of paths) s.insert(p);
    return s;
  }

  insert(path: readonly string[]): void {
    if (!path.length) return;
    const parent = path.slice(0, -1).reduce<FieldSet>((node, pe) => node.child(pe), this);
    parent.members.add(path[path.length - 1]!);
  }

  /** The set below an element, created when missing. */
  child(pe: string): FieldSet {
    let c = this.children.get(pe);
    if (!c) this.children.set(pe, (c = new FieldSet()));
    return c;
  }

  has(path: readonly string[]): boolean {
    return !!this.below(path.slice(0, -1))?.members.has(path[path.length - 1]!);
  }

  /** Whether any member lies strictly below `path`. */
  hasBelow(path: readonly string[]): boolean {
    const node = this.below(path);
    return !!node && !node.empty();
  }

  private below(path: readonly string[]): FieldSet | undefined {
    return path.reduce<FieldSet | undefined>((node, pe) => node?.children.get(pe), this);
  }

  empty(): boolean {
    if (this.members.size) return false;
    for (const c of this.children.values()) if (!c.empty()) return false;
    return true;
  }

  union(other: FieldSet): FieldSet {
    const out = new FieldSet();
    for (const m of this.members) out.members.add(m);
    for (const m of other.members) out.members.add(m);
    for (const [pe, c] of this.children) out.children.set(pe, c.union(other.children.get(pe) ?? EMPTY));
    for (const [pe, c] of other.children) if (!this.children.has(pe)) out.children.set(pe, c.union(EMPTY));
    return out.pruned();
  }

  intersection(other: FieldSet): FieldSet {
    const out = new FieldSet();
    for (const m of this.members) if (other.members.has(m)) out.members.add(m);
    for (const [pe, c] of this.children) {
      const o = other.children.get(pe);
      if (o) out.children.set(pe, c.intersection(o));
    }
    return out.pruned();
  }

  /**
   * Members of this set that are not members of `other` (children are
   * compared path by path). Returns this set itself when nothing is taken
   * away, so an unchanged manager keeps its encoding (see toFieldsV1).
   */
  difference(other: FieldSet): FieldSet {
    if (other.empty()) return this;
    const out = new FieldSet();
    let same = true;
    for (const m of this.members) {
      if (!other.members.has(m)) out.members.add(m);
      else same = false;
    }
    for (const [pe, c] of this.children) {
      const o = other.children.get(pe);
      const d = o ? c.difference(o) : c;
      if (d !== c) same = false;
      out.children.set(pe, d);
    }
    return same ? this : out.pruned();
  }

  /** Every member path, depth first. */
  paths(prefix: string[] = []): string[][] {
    const out: string[][] = [];
    for (const pe of sortedElements(this)) {
      if (this.members.has(pe)) out.push([...prefix, pe]);
      const c = this.children.get(pe);
      if (c) out.push(...c.paths([...prefix, pe]));
    }
    return out;
  }

  private pruned(): FieldSet {
    for (const [pe, c] of this.children) if (c.empty()) this.children.delete(pe);
    return this;
  }
}

const EMPTY = new FieldSet();

/**
 * A position in a walk over a value (typed.ts), for inserting it into sets:
 * each set's node for the position is found once and kept, so a walk
 * neither copies paths nor descends from the root for every member.
 */
export class FieldCursor {
  private nodes: [FieldSet, FieldSet][] | undefined;

  private constructor(private readonly parent: FieldCursor | undefined, private readonly pe: string) {}

  static root(): FieldCursor {
    return new FieldCursor(undefined, '');
  }

  down(pe: string): FieldCursor {
    return new FieldCursor(this, pe);
  }

  get isRoot(): boolean {
    return this.parent === undefined;
  }

  /** Make this position a member of `set`; the root is no member, as FieldSet.insert([]) inserts nothing. */
  insertInto(set: FieldSet): void {
    this.parent?.nodeIn(set).members.add(this.pe);
  }

  private nodeIn(set: FieldSet): FieldSet {
    if (!this.parent) return set;
    for (const [root, node] of this.nodes ?? []) if (root === set) return node;
    const node = this.parent.nodeIn(set).child(this.pe);
    (this.nodes ??= []).push([set, node]);
    return node;
  }
}

const rank = (pe: string): number => 'fkvi'.indexOf(pe[0]!);
const byElementOrder = (a: string, b: string): number => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0);

/** Elements in fieldpath's order: fields, then keys, values, indexes; each sorted. */
function sortedElements(s: FieldSet): string[] {
  const out = [...s.members];
  for (const pe of s.children.keys()) if (!s.members.has(pe)) out.push(pe);
  return out.sort(byElementOrder);
}

export type FieldsV1 = { [pe: string]: FieldsV1 };

// Sets are never changed once built, so the FieldsV1 a set was read from or
// written as is kept: managers a write does not touch cost nothing to re-encode.
const encoded = new WeakMap<FieldSet, FieldsV1>();

/** The FieldsV1 JSON of a set: "." marks an element that is itself a member and has children. */
export function toFieldsV1(s: FieldSet): FieldsV1 {
  let json = encoded.get(s);
  if (!json) encoded.set(s, (json = encodeFieldsV1(s)));
  return json;
}

function encodeFieldsV1(s: FieldSet): FieldsV1 {
  const out: FieldsV1 = {};
  for (const pe of sortedElements(s)) {
    const c = s.children.get(pe);
    if (!c || c.empty()) {
      out[pe] = {};
      continue;
    }
    const inner = encodeFieldsV1(c);
    out[pe] = s.members.has(pe) ? { '.': {}, ...inner } : inner;
  }
  return out;
}

/** Parses FieldsV1; throws on a shape it cannot read. */
export function fromFieldsV1(json: unknown): FieldSet {
  const s = parseFieldsV1(json);
  encoded.set(s, json as FieldsV1);
  return s;
}

function parseFieldsV1(json: unknown): FieldSet {
  const s = new FieldSet();
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new Error('FieldsV1 must be an object');
  for (const [pe, v] of Object.entries(json)) {
    if (pe === '.') continue;
    if (!/^[fkvi]:/.test(pe)) throw new Error(`unknown path element ${pe}`);
    const c = parseFieldsV1(v);
    const selfMember = typeof v === 'object' && v !== null && Object.hasOwn(v, '.');
    if (c.empty() || selfMember) s.members.add(pe);
    if (!c.empty()) s.children.set(pe, c);
  }
  return s;
}

// ---- path elements ----------------------------------------------------------

export const fieldPE = (name: string): string => `f:${name}`;
export const indexPE = (i: number): string => `i:${i}`;
export const valuePE = (v: unknown): string => `v:${JSON.stringify(v)}`;
/** A keyed list item: its key fields sorted by name, as fieldpath sorts them. */
export function keyPE(fields: [string, unknown][]): string {
  const sorted = [...fields].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `k:${JSON.stringify(Object.fromEntries(sorted))}`;
}

/** fieldpath.Path.String: `.spec.containers[name="x"].image`, `[="v"]`, `[0]`. */
export function pathString(path: readonly string[]): string {
  return path.map((pe) => {
    const body = pe.slice(2);
    switch (pe[0]) {
      case 'f': return `.${body}`;
      case 'i': return `[${body}]`;
      case 'v': return `[=${body}]`;
      default: {
        const key = JSON.parse(body) as Record<string, unknown>;
        return `[${Object.entries(key).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}]`;
      }
    }
  }).join('');
}
