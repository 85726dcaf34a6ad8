// What a CEL rule costs, in cel-go's units: kube-apiserver's limits and
// their messages, the worst-case size of each schema node
// (k8s.io/apiserver/pkg/cel/common/schemas.go: maxItems, maxProperties and
// maxLength, else what fits in a 3 MiB request), the static estimate of an
// expression (cel-go checker/cost.go with the Kubernetes library's
// estimator, without cel-go's type checker: types come from the schema and
// the operators), and the runtime cost of one function call
// (interpreter/runtimecost.go). Counting cost while evaluating is
// cel-library.ts; refusing a CRD is cel-rules.ts; stopping a validation is
// cel-validate.ts.

import type { parse } from '@bufbuild/cel';
import { isCelList, isCelMap } from '@bufbuild/cel';
import type { JSONSchemaProps } from '../types.js';
import { isObject } from '../object-meta.js';

type Expr = NonNullable<ReturnType<typeof parse>['expr']>;

// k8s.io/apiserver/pkg/apis/cel/config.go and apiextensions validation.go.
export const PER_CALL_LIMIT = 1_000_000;
export const RUNTIME_CEL_COST_BUDGET = 10_000_000;
export const STATIC_ESTIMATED_COST_LIMIT = 10_000_000;
export const STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000;
const MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024;

/** uint64's saturation point: cel-go's estimates never wrap, they stop here. */
export const MAX_COST = 2 ** 64 - 1;
const STRING_TRAVERSAL = 0.1;
const REGEX_LENGTH = 0.25;

/** validation.go getCostErrorMessage. */
export function costErrorMessage(costName: string, cost: number, limit: number): string {
  const exceed = cost / limit;
  const factor = exceed > 100 ? 'more than 100x' : exceed < 1.5 ? `${exceed.toFixed(6)}x` : `${exceed.toFixed(1)}x`;
  return `${costName} exceeds budget by factor of ${factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`;
}

// ---------------------------------------------------------------------------
// Saturating uint64 arithmetic on doubles (exact below 2^53, which every limit is).

const add = (a: number, b: number): number => Math.min(MAX_COST, a + b);
const mul = (a: number, b: number): number => (a === 0 || b === 0 ? 0 : Math.min(MAX_COST, a * b));
const byFactor = (a: number, f: number): number => Math.min(MAX_COST, Math.ceil(a * f));

export interface Range { min: number; max: number }
const fixed = (n: number): Range => ({ min: n, max: n });
const UNKNOWN: Range = { min: 0, max: MAX_COST };
const plus = (a: Range, b: Range): Range => ({ min: add(a.min, b.min), max: add(a.max, b.max) });
const times = (a: Range, b: Range): Range => ({ min: mul(a.min, b.min), max: mul(a.max, b.max) });
const scaled = (a: Range, f: number): Range => ({ min: byFactor(a.min, f), max: byFactor(a.max, f) });
const union = (a: Range, b: Range): Range => ({ min: Math.min(a.min, b.min), max: Math.max(a.max, b.max) });

// ---------------------------------------------------------------------------
// Declared types with their worst-case sizes (SchemaDeclType).

type Kind = 'list' | 'map' | 'object' | 'string' | 'bytes' | 'bool' | 'int' | 'uint' | 'double' | 'duration' | 'timestamp' | 'null' | 'dyn';

export interface Decl {
  kind: Kind;
  /** Items, properties or characters (bytes for strings: maxLength × 4) at most; 0 where it has no meaning. */
  maxElements: number;
  /** The fewest bytes a value takes in JSON. */
  minSize: number;
  fields?: Record<string, Decl>;
  elem?: Decl;
  key?: Decl;
}

const decl = (kind: Kind, minSize: number, maxElements = 0): Decl => ({ kind, minSize, maxElements });
const STRING_DECL = (): Decl => decl('string', 2, MAX_REQUEST_SIZE_BYTES - 2);
const SCALAR_KINDS = new Set<Kind>(['bool', 'double', 'duration', 'int', 'timestamp', 'uint']);

function stringDecl(s: JSONSchemaProps): Decl {
  const maxLength = typeof s.maxLength === 'number' ? Math.max(0, s.maxLength) : undefined;
  switch (s.format) {
    case 'byte': return decl('bytes', 2, maxLength ?? MAX_REQUEST_SIZE_BYTES - 2);
    case 'duration': return decl('duration', 3, 32);
    case 'date': return decl('timestamp', 12, 12);
    case 'date-time': return decl('timestamp', 21, 32);
    default: break;
  }
  if (maxLength !== undefined) return decl('string', 2, maxLength * 4);
  const enums = Array.isArray(s.enum) ? s.enum.filter((v): v is string => typeof v === 'string') : [];
  if (enums.length) return decl('string', 2, Math.max(...enums.map((v) => v.length)));
  return STRING_DECL();
}

/** WithTypeAndObjectMeta: at a resource root, apiVersion, kind, metadata.name and metadata.generateName are always there. */
function withTypeAndObjectMeta(s: JSONSchemaProps): JSONSchemaProps {
  const str: JSONSchemaProps = { type: 'string' };
  return {
    ...s,
    properties: {
      ...s.properties,
      kind: str,
      apiVersion: str,
      metadata: { type: 'object', properties: { name: str, generateName: str } },
    },
  };
}

const decls = new WeakMap<JSONSchemaProps, [Decl | undefined, Decl | undefined]>();

/** The CEL type of a schema node, or undefined where rules cannot see it. */
export function schemaDecl(s: JSONSchemaProps | undefined, resourceRoot = false): Decl | undefined {
  if (!s) return undefined;
  const cached = decls.get(s);
  if (cached && cached[resourceRoot ? 1 : 0] !== undefined) return cached[resourceRoot ? 1 : 0];
  const d = buildDecl(s, resourceRoot);
  const entry = cached ?? [undefined, undefined];
  entry[resourceRoot ? 1 : 0] = d;
  decls.set(s, entry);
  return d;
}

function buildDecl(schema: JSONSchemaProps, resourceRoot: boolean): Decl | undefined {
  if (schema['x-kubernetes-int-or-string']) {
    const maxLength = typeof schema.maxLength === 'number' ? Math.max(0, schema.maxLength) * 4 : MAX_REQUEST_SIZE_BYTES - 2;
    return decl('dyn', 1, maxLength);
  }
  const s = resourceRoot ? withTypeAndObjectMeta(schema) : schema;
  const embedded = (x: JSONSchemaProps): boolean => x['x-kubernetes-embedded-resource'] === true;
  switch (s.type) {
    case 'array': {
      const items = s.items && !Array.isArray(s.items) ? schemaDecl(s.items, embedded(s.items)) : undefined;
      if (!items) return undefined;
      const maxItems = typeof s.maxItems === 'number' ? Math.max(0, s.maxItems) : Math.floor((MAX_REQUEST_SIZE_BYTES - 2) / (items.minSize + 1));
      return { kind: 'list', minSize: 2, maxElements: maxItems, elem: items };
    }
    case 'object': {
      if (isObject(s.additionalProperties)) {
        const ap = s.additionalProperties as JSONSchemaProps;
        const values = schemaDecl(ap, embedded(ap));
        if (!values) return undefined;
        const maxProps = typeof s.maxProperties === 'number' ? Math.max(0, s.maxProperties)
          : Math.floor((MAX_REQUEST_SIZE_BYTES - 2) / (values.minSize + 6));
        return { kind: 'map', minSize: 2, maxElements: maxProps, key: STRING_DECL(), elem: values };
      }
      const fields: Record<string, Decl> = {};
      const required = new Set(Array.isArray(s.required) ? s.required : []);
      let minSize = 2;
      for (const [name, prop] of Object.entries(s.properties ?? {})) {
        const field = schemaDecl(prop, embedded(prop));
        if (!field) continue;
        fields[name] = field;
        if (required.has(name) && prop.default === undefined) minSize += name.length + field.minSize + 4;
      }
      return { kind: 'object', minSize, maxElements: 0, fields };
    }
    case 'string': return stringDecl(s);
    case 'boolean': return decl('bool', 4);
    case 'number': return decl('double', 1);
    case 'integer': return decl('int', 1);
    default: return undefined;
  }
}

/** compilation.go maxCardinality: how often a value this small fits in one request, for rules under unbounded lists or maps. */
export function maxCardinality(d: Decl | undefined): number {
  return Math.floor(MAX_REQUEST_SIZE_BYTES / ((d?.minSize ?? 0) + 1));
}

/** cel_validation.go extractMaxElements: by how much a node multiplies how often its children occur; undefined is unbounded. */
export function childCardinalityFactor(s: JSONSchemaProps): number | undefined {
  switch (s.type) {
    case 'object':
      if (s.additionalProperties !== undefined && s.additionalProperties !== false) {
        return typeof s.maxProperties === 'number' ? Math.max(0, s.maxProperties) : undefined;
      }
      return 1;
    case 'array': return typeof s.maxItems === 'number' ? Math.max(0, s.maxItems) : undefined;
    default: return 1;
  }
}

export const multiplyCardinality = mul;

// ---------------------------------------------------------------------------
// Static estimation (checker/cost.go's coster).

interface EntrySize { container: 'list' | 'map'; key: Range; val: Range }
interface LocalVar { path: string[] | undefined; size: Range | undefined; entry: EntrySize | undefined; type: Decl | undefined }

const BOOL_RESULT = new Set(['_==_', '_!=_', '_<_', '_<=_', '_>_', '_>=_', '!_', '_&&_', '_||_', '@in', '@not_strictly_false',
  'contains', 'startsWith', 'endsWith', 'matches', 'isSorted', 'isURL', 'bool']);
const INT_RESULT = new Set(['size', 'indexOf', 'lastIndexOf', 'int', 'getHours', 'getMinutes', 'getSeconds', 'getMilliseconds',
  'getDate', 'getDayOfMonth', 'getDayOfWeek', 'getDayOfYear', 'getFullYear', 'getMonth']);
const STRING_RESULT = new Set(['string', 'lowerAscii', 'upperAscii', 'replace', 'substring', 'trim', 'charAt', 'join', 'format', 'quote', 'reverse']);
const ORDERING = new Set(['_<_', '_<=_', '_>_', '_>=_']);
const SIZED_KINDS = new Set<Kind | undefined>(['string', 'bytes', 'dyn']);
const id = (e: Expr): number => Number(e.id);

/** Estimates an expression's cost over `self` (and `oldSelf`) of the given type, as cel-go's EstimateCost would. */
export function estimateCost(expr: Expr, root: Decl | undefined): Range {
  return new Coster(root).cost(expr);
}

class Coster {
  private readonly paths = new Map<number, string[]>();
  private readonly sizes = new Map<number, Range>();
  private readonly entries = new Map<number, EntrySize>();
  private readonly types = new Map<number, Decl | undefined>();
  private readonly locals = new Map<string, LocalVar[]>();

  constructor(private readonly root: Decl | undefined) {}

  cost(e: Expr | undefined): Range {
    if (!e) return fixed(0);
    const k = e.exprKind;
    switch (k.case) {
      case 'constExpr': this.types.set(id(e), constDecl(k.value.constantKind.case)); return fixed(0);
      case 'identExpr': return this.ident(e, k.value.name);
      case 'selectExpr': return this.select(e, k.value);
      case 'callExpr': return this.call(e, k.value);
      case 'listExpr': return this.createList(e, k.value.elements);
      case 'structExpr': return this.createStruct(e, k.value);
      case 'comprehensionExpr': return this.comprehension(e, k.value);
      default: return fixed(0);
    }
  }

  private local(name: string): LocalVar | undefined {
    const stack = this.locals.get(name);
    return stack?.[stack.length - 1];
  }

  private push(name: string, v: LocalVar): void {
    const stack = this.locals.get(name) ?? [];
    stack.push(v);
    this.locals.set(name, stack);
  }

  private pop(name: string): void {
    this.locals.get(name)?.pop();
  }

  private pathOf(e: Expr): string[] | undefined {
    if (e.exprKind.case === 'identExpr') {
      const v = this.local(e.exprKind.value.name);
      if (v) return v.path;
    }
    return this.paths.get(id(e));
  }

  private typeOf(e: Expr | undefined): Decl | undefined {
    return e ? this.types.get(id(e)) : undefined;
  }

  private ident(e: Expr, name: string): Range {
    const v = this.local(name);
    if (v) {
      if (v.path) this.paths.set(id(e), v.path);
      this.types.set(id(e), v.type);
    } else {
      this.paths.set(id(e), [name]);
      this.types.set(id(e), this.root);
    }
    return fixed(1);
  }

  private select(e: Expr, sel: { operand?: Expr; field: string; testOnly: boolean }): Range {
    if (sel.testOnly) {
      this.types.set(id(e), decl('bool', 4));
      return plus(fixed(1), this.cost(sel.operand));
    }
    let sum = this.cost(sel.operand);
    const t = this.typeOf(sel.operand);
    if (t?.kind === 'map' || t?.kind === 'object') sum = plus(sum, fixed(1));
    const path = sel.operand ? this.pathOf(sel.operand) : undefined;
    if (path) this.paths.set(id(e), [...path, sel.field]);
    this.types.set(id(e), t?.kind === 'object' ? t.fields?.[sel.field] : t?.kind === 'map' ? t.elem : undefined);
    return sum;
  }

  /** EstimateSize of the schema-backed sizeEstimator: the worst case of the node a path leads to. */
  private estimateSize(path: string[] | undefined): Range | undefined {
    if (!path?.length || !this.root) return undefined;
    let node: Decl | undefined = this.root;
    for (const name of path.slice(1)) {
      if (name === '@items' || name === '@values') node = node.elem;
      else if (name === '@keys') node = node.key;
      else node = node.fields?.[name];
      if (!node) return undefined;
    }
    return { min: 0, max: node.maxElements };
  }

  private computeSize(e: Expr): Range | undefined {
    const known = this.sizes.get(id(e));
    if (known) return known;
    const literal = exprSize(e);
    if (literal) return literal;
    const estimated = this.estimateSize(this.pathOf(e));
    if (estimated) {
      this.sizes.set(id(e), estimated);
      return estimated;
    }
    const t = this.typeOf(e);
    if (t && SCALAR_KINDS.has(t.kind)) return fixed(1);
    if (e.exprKind.case === 'identExpr') return this.local(e.exprKind.value.name)?.size;
    return undefined;
  }

  private sizeOrUnknown(e: Expr | undefined): Range {
    return (e && this.computeSize(e)) ?? UNKNOWN;
  }

  private entryOf(e: Expr | undefined): EntrySize | undefined {
    if (!e) return undefined;
    const known = this.entries.get(id(e));
    if (known) return known;
    if (e.exprKind.case === 'identExpr') return this.local(e.exprKind.value.name)?.entry;
    return undefined;
  }

  private call(e: Expr, call: { function: string; target?: Expr; args: Expr[] }): Range {
    const { function: fn, target, args } = call;
    if (fn === 'dyn' && args.length === 1) {
      const argCost = this.cost(args[0]);
      const size = this.computeSize(args[0]!);
      if (size) this.sizes.set(id(e), size);
      const entry = this.entryOf(args[0]);
      if (entry) this.entries.set(id(e), entry);
      this.types.set(id(e), this.typeOf(args[0]));
      return plus(fixed(1), argCost);
    }
    const argCosts = args.map((a) => this.cost(a));
    let sum = fixed(0);
    if (target) sum = plus(sum, this.cost(target));
    this.types.set(id(e), this.resultType(fn, target, args));
    const { cost, resultSize } = this.functionCost(e, fn, target, args, argCosts);
    let size = resultSize;
    if (fn === '_[_]' && args.length === 2) {
      const container = this.typeOf(args[0]);
      size = this.entryOf(args[0])?.val;
      const path = this.pathOf(args[0]!);
      if (path) this.paths.set(id(e), [...path, container?.kind === 'map' ? '@values' : '@items']);
    }
    size ??= this.computeSize(e);
    if (size) this.sizes.set(id(e), size);
    return plus(sum, cost);
  }

  private resultType(fn: string, target: Expr | undefined, args: Expr[]): Decl | undefined {
    if (BOOL_RESULT.has(fn)) return decl('bool', 4);
    if (INT_RESULT.has(fn)) return decl('int', 1);
    if (STRING_RESULT.has(fn)) return decl('string', 2);
    switch (fn) {
      case 'split': return { kind: 'list', minSize: 2, maxElements: 0, elem: decl('string', 2) };
      case 'uint': return decl('uint', 1);
      case 'double': return decl('double', 1);
      case 'bytes': return decl('bytes', 2);
      case 'duration': return decl('duration', 3);
      case 'timestamp': return decl('timestamp', 21);
      case 'sum': case 'min': case 'max': return this.typeOf(target)?.elem;
      case '_[_]': return this.typeOf(args[0])?.elem;
      case '_?_:_': return this.typeOf(args[1]) ?? this.typeOf(args[2]);
      case '_+_': {
        const a = this.typeOf(args[0]);
        const b = this.typeOf(args[1]);
        return a?.kind === 'list' && !a.elem ? b ?? a : a ?? b;
      }
      case '_-_': case '_*_': case '_/_': case '_%_': case '-_': return this.typeOf(args[0]) ?? this.typeOf(args[1]);
      default: return undefined;
    }
  }

  private functionCost(e: Expr, fn: string, target: Expr | undefined, args: Expr[], argCosts: Range[]): { cost: Range; resultSize?: Range } {
    const argSum = argCosts.reduce(plus, fixed(0));
    const library = this.libraryCost(fn, target, args);
    if (library) return { cost: plus(library.cost, argSum), resultSize: library.resultSize };
    const kind0 = this.typeOf(args[0])?.kind;
    switch (fn) {
      case 'startsWith': case 'endsWith':
        if (target && args.length === 1) return { cost: plus(scaled(this.sizeOrUnknown(args[0]), STRING_TRAVERSAL), argSum) };
        break;
      case '@in':
        if (args.length === 2) return { cost: plus(this.sizeOrUnknown(args[1]), argSum) };
        break;
      case 'matches':
        if (target && args.length === 1) {
          const str = scaled(plus(this.sizeOrUnknown(target), fixed(1)), STRING_TRAVERSAL);
          const regex = scaled(this.sizeOrUnknown(args[0]), REGEX_LENGTH);
          return { cost: plus(times(str, regex), argSum) };
        }
        break;
      case 'contains':
        if (target && args.length === 1) {
          const str = scaled(this.sizeOrUnknown(target), STRING_TRAVERSAL);
          const sub = scaled(this.sizeOrUnknown(args[0]), STRING_TRAVERSAL);
          return { cost: plus(times(str, sub), argSum) };
        }
        break;
      case '_&&_': case '_||_':
        return { cost: { min: argCosts[0]!.min, max: add(argCosts[0]!.max, argCosts[1]!.max) } };
      case '_?_:_': {
        const size = union(this.sizeOrUnknown(args[1]), this.sizeOrUnknown(args[2]));
        const a = this.entryOf(args[1]);
        const b = this.entryOf(args[2]);
        if (a && b) this.entries.set(id(e), { container: a.container, key: union(a.key, b.key), val: union(a.val, b.val) });
        return { cost: plus(argCosts[0]!, union(argCosts[1]!, argCosts[2]!)), resultSize: size };
      }
      case '_+_':
        if (args.length === 2 && (kind0 === 'string' || kind0 === 'bytes' || kind0 === 'list')) {
          const resultSize = plus(this.sizeOrUnknown(args[0]), this.sizeOrUnknown(args[1]));
          const a = this.entryOf(args[0]);
          const b = this.entryOf(args[1]);
          if (a && b) this.entries.set(id(e), { container: a.container, key: union(a.key, b.key), val: union(a.val, b.val) });
          if (kind0 === 'list') return { cost: plus(fixed(1), argSum), resultSize };
          return { cost: plus(scaled(resultSize, STRING_TRAVERSAL), argSum), resultSize };
        }
        break;
      case '_==_': case '_!=_':
        return { cost: plus(this.comparisonCost(args), argSum) };
      default:
        if (ORDERING.has(fn) && SIZED_KINDS.has(kind0)) return { cost: plus(this.comparisonCost(args), argSum) };
    }
    return { cost: plus(fixed(1), argSum) };
  }

  /** O(min(m, n)): equality of two strings, lists or maps walks the shorter. */
  private comparisonCost(args: Expr[]): Range {
    const smallestMax = Math.min(this.sizeOrUnknown(args[0]).max, this.sizeOrUnknown(args[1]).max);
    return scaled({ min: smallestMax > 0 ? 1 : 0, max: smallestMax }, STRING_TRAVERSAL);
  }

  /** library/cost.go EstimateCallCost, for the library functions this cluster provides. Target and argument costs are added by the caller. */
  private libraryCost(fn: string, target: Expr | undefined, args: Expr[]): { cost: Range; resultSize?: Range } | undefined {
    if (!target) return undefined;
    const size = this.sizeOrUnknown(target);
    const t = this.typeOf(target);
    switch (fn) {
      case 'isSorted': case 'sum': case 'max': case 'min': case 'indexOf': case 'lastIndexOf': {
        if (t?.kind !== 'list') return { cost: scaled(size, STRING_TRAVERSAL) };
        let elCost = fixed(1);
        const elem = t.elem;
        if (elem && (elem.kind === 'string' || elem.kind === 'bytes')) elCost = plus(elCost, scaled(this.itemSize(target, elem), STRING_TRAVERSAL));
        return { cost: times(size, elCost) };
      }
      case 'lowerAscii': case 'upperAscii': case 'substring': case 'trim':
        return { cost: scaled(size, STRING_TRAVERSAL), resultSize: size };
      case 'replace': return args.length >= 2 ? { cost: scaled(size, 2 * STRING_TRAVERSAL), resultSize: this.replaceSize(size, args) } : undefined;
      case 'split': {
        let max = size.max;
        const limit = args[1]?.exprKind.case === 'constExpr' ? args[1].exprKind.value.constantKind : undefined;
        if (limit?.case === 'int64Value') max = Number(limit.value);
        return { cost: scaled(size, 2 * STRING_TRAVERSAL), resultSize: { min: 0, max } };
      }
      case 'join': {
        let sz = t?.elem ? times(size, this.itemSize(target, t.elem)) : fixed(0);
        if (args.length > 0) {
          const separators = { min: size.min > 0 ? size.min - 1 : 0, max: size.max > 0 ? size.max - 1 : 0 };
          sz = plus(sz, times(this.sizeOrUnknown(args[0]), separators));
        }
        return { cost: scaled(sz, STRING_TRAVERSAL), resultSize: sz };
      }
      default: return undefined;
    }
  }

  /** listElementNode: an item's size, from the schema when the list has a path there. */
  private itemSize(list: Expr, elem: Decl): Range {
    const path = this.pathOf(list);
    const fromPath = path ? this.estimateSize([...path, '@items']) : undefined;
    if (fromPath) return fromPath;
    return SCALAR_KINDS.has(elem.kind) ? fixed(1) : UNKNOWN;
  }

  private replaceSize(sz: Range, args: Expr[]): Range {
    const from = this.sizeOrUnknown(args[0]);
    const to = this.sizeOrUnknown(args[1]);
    const count = { min: 0, max: 0 };
    const retained = { min: 0, max: 0 };
    if (from.min === 0) {
      count.max = sz.max < MAX_COST ? sz.max + 1 : sz.max;
      retained.max = sz.max;
    } else if (to.max <= from.min) {
      retained.max = sz.max;
    } else {
      count.max = Math.ceil(sz.max / from.min);
    }
    if (from.max === 0) {
      count.min = sz.min < MAX_COST ? sz.min + 1 : sz.min;
      retained.min = sz.min;
    } else if (from.max <= to.min) {
      retained.min = sz.min;
    } else {
      count.min = Math.ceil(sz.min / from.max);
    }
    return plus(times(count, to), retained);
  }

  private createList(e: Expr, elements: Expr[]): Range {
    let sum = fixed(0);
    let itemSize: Range = { min: elements.length ? MAX_COST : 0, max: 0 };
    for (const el of elements) {
      sum = plus(sum, this.cost(el));
      itemSize = union(itemSize, this.sizeOrUnknown(el));
    }
    this.entries.set(id(e), { container: 'list', key: fixed(1), val: itemSize });
    this.types.set(id(e), { kind: 'list', minSize: 2, maxElements: 0, elem: elements[0] ? this.typeOf(elements[0]) : undefined });
    return plus(sum, fixed(10));
  }

  private createStruct(e: Expr, s: { messageName: string; entries: { keyKind: { case?: string; value?: unknown }; value?: Expr }[] }): Range {
    let sum = fixed(0);
    if (s.messageName) {
      for (const entry of s.entries) sum = plus(sum, this.cost(entry.value));
      return plus(sum, fixed(40));
    }
    let keySize: Range = { min: s.entries.length ? MAX_COST : 0, max: 0 };
    let valSize: Range = { ...keySize };
    for (const entry of s.entries) {
      const key = entry.keyKind.case === 'mapKey' ? entry.keyKind.value as Expr : undefined;
      sum = plus(plus(sum, this.cost(key)), this.cost(entry.value));
      keySize = union(keySize, this.sizeOrUnknown(key));
      valSize = union(valSize, this.sizeOrUnknown(entry.value));
    }
    this.entries.set(id(e), { container: 'map', key: keySize, val: valSize });
    this.types.set(id(e), { kind: 'map', minSize: 2, maxElements: 0 });
    return plus(sum, fixed(30));
  }

  private comprehension(e: Expr, c: { iterRange?: Expr; accuInit?: Expr; accuVar: string; iterVar: string; iterVar2: string; loopCondition?: Expr; loopStep?: Expr; result?: Expr }): Range {
    let sum = plus(this.cost(c.iterRange), this.cost(c.accuInit));
    const init = c.accuInit;
    this.push(c.accuVar, {
      path: init ? this.pathOf(init) : undefined, size: init ? this.computeSize(init) : undefined,
      entry: this.entryOf(init), type: this.typeOf(init),
    });
    const range = c.iterRange;
    const rangeEntry = this.entryOf(range);
    const rangeType = this.typeOf(range);
    const container = rangeEntry?.container ?? (rangeType?.kind === 'map' ? 'map' : 'list');
    const rangePath = (range && this.pathOf(range)) ?? [];
    if (c.iterVar2) {
      this.push(c.iterVar, { path: [...rangePath, container === 'list' ? '@indices' : '@keys'], size: rangeEntry?.key, entry: undefined, type: container === 'list' ? decl('int', 1) : rangeType?.key });
      this.push(c.iterVar2, { path: [...rangePath, container === 'list' ? '@items' : '@values'], size: rangeEntry?.val, entry: undefined, type: rangeType?.elem });
    } else {
      const list = container === 'list';
      this.push(c.iterVar, { path: [...rangePath, list ? '@items' : '@keys'], size: list ? rangeEntry?.val : rangeEntry?.key, entry: undefined, type: list ? rangeType?.elem : rangeType?.key });
    }
    const loopCost = this.cost(c.loopCondition);
    const stepCost = this.cost(c.loopStep);
    this.pop(c.iterVar);
    if (c.iterVar2) this.pop(c.iterVar2);
    sum = plus(sum, this.cost(c.result));
    this.pop(c.accuVar);
    const rangeCount = this.sizeOrUnknown(range);
    sum = plus(sum, times(rangeCount, plus(stepCost, loopCost)));
    const initKind = init?.exprKind.case;
    if (initKind === 'constExpr') {
      const size = this.computeSize(init!);
      if (size) this.sizes.set(id(e), size);
      this.types.set(id(e), this.typeOf(c.result));
    } else if (initKind === 'listExpr' || initKind === 'structExpr') {
      this.sizes.set(id(e), rangeCount);
      const stepEntry = this.entryOf(c.loopStep);
      if (stepEntry) this.entries.set(id(e), stepEntry);
      this.types.set(id(e), this.typeOf(c.loopStep) ?? this.typeOf(c.result));
    } else {
      this.types.set(id(e), this.typeOf(c.result));
    }
    return sum;
  }
}

function constDecl(kind: string | undefined): Decl | undefined {
  switch (kind) {
    case 'stringValue': return decl('string', 2);
    case 'bytesValue': return decl('bytes', 2);
    case 'doubleValue': return decl('double', 1);
    case 'boolValue': return decl('bool', 4);
    case 'int64Value': return decl('int', 1);
    case 'uint64Value': return decl('uint', 1);
    case 'nullValue': return decl('null', 4);
    default: return undefined;
  }
}

/** computeExprSize: literals know their size. */
function exprSize(e: Expr): Range | undefined {
  const k = e.exprKind;
  if (k.case === 'constExpr') {
    const c = k.value.constantKind;
    if (c.case === 'stringValue') return fixed([...c.value].length);
    if (c.case === 'bytesValue') return fixed(c.value.length);
    return c.case ? fixed(1) : undefined;
  }
  if (k.case === 'listExpr') return fixed(k.value.elements.length);
  if (k.case === 'structExpr' && !k.value.messageName) return fixed(k.value.entries.length);
  return undefined;
}

// ---------------------------------------------------------------------------
// Runtime cost of one call (CostTracker.costCall with the Kubernetes
// library's CallCost). `args` holds the target first for a method, as
// cel-go's InterpretableCall.Args() does.

function actualSize(v: unknown): number {
  if (typeof v === 'string') return codePoints(v);
  if (v instanceof Uint8Array) return v.length;
  if (Array.isArray(v)) return v.length;
  if (isCelList(v) || isCelMap(v)) return v.size;
  if (v instanceof Map) return v.size;
  return 1;
}

function codePoints(s: string): number {
  if (!/[\uD800-\uDFFF]/.test(s)) return s.length;
  let n = 0;
  for (const _ of s) n++;
  return n;
}

function traversalCost(v: unknown): number {
  if (typeof v === 'string') return Math.floor(v.length * STRING_TRAVERSAL);
  if (v instanceof Uint8Array) return Math.floor(v.length * STRING_TRAVERSAL);
  if (Array.isArray(v) || isCelList(v)) {
    let cost = 0;
    for (const item of v as Iterable<unknown>) cost += traversalCost(item);
    return cost;
  }
  if (isCelMap(v) || v instanceof Map) {
    let cost = 0;
    for (const [k, item] of (v as Map<unknown, unknown>).entries()) cost += traversalCost(k) + traversalCost(item);
    return cost;
  }
  return 1;
}

const isText = (v: unknown): boolean => typeof v === 'string' || v instanceof Uint8Array;

export function callCost(fn: string, args: unknown[], result: unknown): number {
  const a = args[0];
  const b = args[1];
  switch (fn) {
    case 'isSorted': case 'sum': case 'max': case 'min': case 'indexOf': case 'lastIndexOf':
      return traversalCost(a);
    case 'lowerAscii': case 'upperAscii': case 'substring': case 'trim':
      return Math.ceil(actualSize(a) * STRING_TRAVERSAL);
    case 'replace': case 'split':
      return Math.ceil(actualSize(a) * 2 * STRING_TRAVERSAL);
    case 'join':
      return Math.ceil(actualSize(result) * 2 * STRING_TRAVERSAL);
    case 'startsWith': case 'endsWith':
      return Math.ceil(actualSize(a) * STRING_TRAVERSAL);
    case '@in':
      return actualSize(b);
    case '_==_': case '_!=_':
      return Math.ceil(Math.min(actualSize(a), actualSize(b)) * STRING_TRAVERSAL);
    case '_<_': case '_<=_': case '_>_': case '_>=_':
      return isText(a) ? Math.ceil(Math.min(actualSize(a), actualSize(b)) * STRING_TRAVERSAL) : 1;
    case '_+_':
      return isText(a) ? Math.ceil((actualSize(a) + actualSize(b)) * STRING_TRAVERSAL) : 1;
    case 'matches':
      return Math.ceil((1 + actualSize(a)) * STRING_TRAVERSAL) * Math.ceil(actualSize(b) * REGEX_LENGTH);
    case 'contains':
      return isText(a) ? Math.ceil(actualSize(a) * STRING_TRAVERSAL) * Math.ceil(actualSize(b) * STRING_TRAVERSAL) : 1;
    default:
      return 1;
  }
}
