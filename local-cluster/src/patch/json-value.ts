// Helpers for patching plain JSON values the way Go code sees them. The
// apiserver's patch code works on map[string]interface{} trees; its behaviour
// (and its error messages) depend on Go's dynamic types and fmt formatting, so
// those are reproduced here.

export type JsonMap = Record<string, unknown>;

export function isMap(v: unknown): v is JsonMap {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Own property or undefined: never reads through the prototype (e.g. "__proto__"). */
export function getOwn(m: JsonMap, key: string): unknown {
  return Object.hasOwn(m, key) ? m[key] : undefined;
}

/** Assignment that cannot change a prototype, whatever key a client sends. */
export function setOwn(m: JsonMap, key: string, value: unknown): void {
  Object.defineProperty(m, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * The Go dynamic type a decoded JSON value has in the apiserver. Integers are
 * int64 because the apiserver decodes patches with "PreserveInts".
 */
export type GoType = 'nil' | 'bool' | 'string' | 'int64' | 'float64' | 'slice' | 'map';

export function goType(v: unknown): GoType {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int64' : 'float64';
  return Array.isArray(v) ? 'slice' : 'map';
}

/** reflect.TypeOf(v).String(), as printed by mergepatch.ErrBadArgType. */
export function goTypeName(v: unknown): string {
  switch (goType(v)) {
    case 'nil': return '%!s(<nil>)';
    case 'slice': return '[]interface {}';
    case 'map': return 'map[string]interface {}';
    default: return goType(v);
  }
}

/** The word encoding/json uses in "cannot unmarshal X into Go value of type T". */
export function jsonTypeWord(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'object';
  if (typeof v === 'boolean') return 'bool';
  return typeof v; // string | number
}

/** fmt's %v for a decoded JSON value (maps print with sorted keys). */
export function goValue(v: unknown): string {
  if (v === null || v === undefined) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') return goNumber(v);
  if (Array.isArray(v)) return `[${v.map(goValue).join(' ')}]`;
  const m = v as JsonMap;
  return `map[${Object.keys(m).sort().map((k) => `${k}:${goValue(m[k])}`).join(' ')}]`;
}

/** fmt's %s: strings print as-is, anything else as %!s(type=value). */
export function goString(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) return '%!s(<nil>)';
  return `%!s(${goTypeName(v)}=${goValue(v)})`;
}

// int64 prints in decimal; float64 uses strconv's shortest 'g' form, which
// switches to an exponent below 1e-4 and from 1e6 on.
function goNumber(n: number): string {
  if (Number.isInteger(n) || !Number.isFinite(n)) return String(n);
  const exp = Math.floor(Math.log10(Math.abs(n)));
  if (exp >= -4 && exp < 6) return String(n);
  const [mantissa, e = '0'] = n.toExponential().split('e');
  const expNum = Number(e);
  const digits = String(Math.abs(expNum)).padStart(2, '0');
  return `${mantissa}e${expNum < 0 ? '-' : '+'}${digits}`;
}

/** Structural JSON equality (object key order is irrelevant). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  if (isMap(a)) {
    if (!isMap(b)) return false;
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length
      && keys.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}
