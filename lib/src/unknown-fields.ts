// Fields a request body carries that its endpoint does not know. The
// contract accepts them (clients may send fields of newer API versions), so
// they are not errors; but a misspelt option silently ignored gives a job
// the user did not ask for (`{"maxResolution":"720"}`, the CRD's spelling,
// gave a `best` job). The 201 answer names each in `warnings`, with the
// field it most likely meant: the same name once case, `_` and `-` are
// ignored (camelCase, kebab-case), else the nearest known name within a
// small edit distance.

/** One ignored field, as the answer's `warnings` list it. */
export interface FieldWarning {
  code: 'unknown_field';
  param: string;
  message: string;
  /** The known field the name most likely meant, when one is near. */
  did_you_mean?: string;
}

/** At most this many unknown fields are named; a body of thousands of keys gets a bounded answer. */
export const MAX_FIELD_WARNINGS = 20;
/** Names are quoted up to this many characters, and only names this short are compared. */
const MAX_NAME_CHARS = 100;

/** The name with case and word separators ignored: `maxResolution`, `max-resolution` and `MAX_RESOLUTION` are one. */
const folded = (name: string) => name.toLowerCase().replace(/[-_\s]/g, '');

/**
 * Optimal string alignment distance (Levenshtein with adjacent
 * transpositions, each edit counting one), stopping early past `limit`.
 */
export function editDistance(a: string, b: string, limit = Infinity): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let beforePrev: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, beforePrev[j - 2]! + 1);
      row.push(d);
      best = Math.min(best, d);
    }
    if (best > limit) return limit + 1;
    beforePrev = prev;
    prev = row;
  }
  return prev[b.length]!;
}

/** Edits allowed between a folded name and a known one: one for short names, two otherwise. */
const allowedEdits = (name: string) => (name.length <= 5 ? 1 : 2);

/** The known field `name` most likely meant, or undefined when none is near. */
export function nearestField(name: string, known: readonly string[]): string | undefined {
  if (name.length > MAX_NAME_CHARS) return undefined;
  const f = folded(name);
  if (f === '') return undefined;
  const same = known.find((k) => folded(k) === f);
  if (same !== undefined) return same;
  let best: { field: string; distance: number } | undefined;
  for (const k of known) {
    const limit = allowedEdits(folded(k));
    const distance = editDistance(f, folded(k), limit);
    if (distance <= limit && (!best || distance < best.distance)) best = { field: k, distance };
  }
  return best?.field;
}

/** The body's fields that are not `known`, in the body's order, each with its nearest known field. */
export function unknownFieldWarnings(body: Readonly<Record<string, unknown>>, known: readonly string[]): FieldWarning[] {
  const knownSet = new Set(known);
  const warnings: FieldWarning[] = [];
  for (const name of Object.keys(body)) {
    if (knownSet.has(name)) continue;
    if (warnings.length === MAX_FIELD_WARNINGS) break;
    const param = name.length > MAX_NAME_CHARS ? `${name.slice(0, MAX_NAME_CHARS)}…` : name;
    const meant = nearestField(name, known);
    warnings.push({
      code: 'unknown_field',
      param,
      message: `Unknown field '${param}' was ignored${meant === undefined ? '' : `; did you mean '${meant}'?`}`,
      ...(meant !== undefined && { did_you_mean: meant }),
    });
  }
  return warnings;
}
