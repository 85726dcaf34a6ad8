// The CEL environment of x-kubernetes-validations rules: @bufbuild/cel for
// the language, plus the part of the Kubernetes CEL library
// (k8s.io/apiserver/pkg/cel/library) that the rules here use. Compiling a
// rule here stands in for cel-go's parse and check: syntax errors, and
// references to names that do not exist (the checker's "undeclared
// reference"), are reported in cel-go's display format. Type checking is
// not done (see README "Known differences"); evaluation errors are worded as
// cel-go words them where the two libraries differ. Evaluation counts cost
// as cel-go's CostTracker does and stops past a limit (cel-cost.ts says
// what each step costs).

import { celEnv, celFunc, celMethod, CelScalar, isCelError, listType, parse, plan } from '@bufbuild/cel';
import type { CelEnv, CelInput, CelList, CelValue } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { callCost, estimateCost, PER_CALL_LIMIT, type Decl, type Range } from './cel-cost.js';

type Expr = ReturnType<typeof parse>['expr'];
type Node = NonNullable<Expr>;

// ---------------------------------------------------------------------------
// Kubernetes library functions (library/lists.go, library/urls.go).

function comparable(list: CelList): (bigint | number | string)[] | undefined {
  const items = [...list];
  const ok = items.every((v) => typeof v === 'bigint' || typeof v === 'number' || typeof v === 'string');
  return ok ? items as (bigint | number | string)[] : undefined;
}

function extreme(list: CelList, pick: (a: bigint | number | string, b: bigint | number | string) => boolean): CelInput {
  const items = comparable(list);
  // cel-go: "min called on empty list"; the value is an error either way.
  if (!items?.length) throw new Error(`${pick === less ? 'min' : 'max'} called on empty list`);
  return items.reduce((best, v) => (pick(v, best) ? v : best));
}

const less = (a: bigint | number | string, b: bigint | number | string): boolean => a < b;
const greater = (a: bigint | number | string, b: bigint | number | string): boolean => a > b;
const DYN_LIST = listType(CelScalar.DYN);

/** Go's url.ParseRequestURI accepts an absolute URI or an absolute path. */
function isRequestUri(s: string): boolean {
  if (s.startsWith('/')) return !/\s/.test(s);
  return /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(s) && URL.canParse(s);
}

const KUBERNETES_LIBRARY = [
  celMethod('isSorted', DYN_LIST, [], CelScalar.BOOL, function (this: CelList) {
    const items = comparable(this) ?? [];
    return items.every((v, i) => i === 0 || !(v < items[i - 1]!));
  }),
  celMethod('sum', DYN_LIST, [], CelScalar.DYN, function (this: CelList) {
    const items = comparable(this) ?? [];
    if (items.every((v) => typeof v === 'bigint')) return items.reduce((a, b) => (a as bigint) + (b as bigint), 0n);
    return items.reduce((a, b) => Number(a) + Number(b), 0);
  }),
  celMethod('min', DYN_LIST, [], CelScalar.DYN, function (this: CelList) { return extreme(this, less); }),
  celMethod('max', DYN_LIST, [], CelScalar.DYN, function (this: CelList) { return extreme(this, greater); }),
  celFunc('isURL', [CelScalar.STRING], CelScalar.BOOL, (s: string) => isRequestUri(s)),
];

const ENV = celEnv({ funcs: [...strings, ...KUBERNETES_LIBRARY] });

// ---------------------------------------------------------------------------
// Cost tracking. @bufbuild/cel has no cost observer, so a compiled program is
// the expression rewritten to charge what cel-go's tracker charges: every
// function call through a wrapped resolver (its cost from its arguments),
// and identifiers, selections, indexes and literals through COST_FN, which
// returns its first argument and charges its second. '@' names cannot be
// written in a rule, so COST_FN never meets one.

const COST_FN = '@cost';
const COST_LIMIT_EXCEEDED = 'operation cancelled: actual cost limit exceeded';

interface Tracker { cost: number; limit: number }
let tracker: Tracker | undefined;

class CostLimitExceeded extends Error {}

function charge(cost: number): void {
  if (!tracker) return;
  tracker.cost += cost;
  // Thrown outside any function's own try/catch, so no && or || can absorb it.
  if (tracker.cost > tracker.limit) throw new CostLimitExceeded(COST_LIMIT_EXCEEDED);
}

interface Callable {
  call(id: number, target: unknown, args: unknown[]): unknown;
}

const CHARGE: Callable = {
  call(_id, _target, args) {
    charge(Number(args[1]));
    return args[0];
  },
};

const costedGroups = new Map<string, Callable | undefined>();

function costedGroup(name: string): Callable | undefined {
  if (costedGroups.has(name)) return costedGroups.get(name);
  const group = ENV.funcs.find(name) as Callable | undefined;
  const costed: Callable | undefined = group && {
    call(id, target, args) {
      const result = group.call(id, target, args);
      if (tracker) charge(callCost(name, target === undefined ? args : [target, ...args], result));
      return result;
    },
  };
  costedGroups.set(name, costed);
  return costed;
}

const COSTED_ENV = {
  namespace: ENV.namespace,
  registry: ENV.registry,
  variables: ENV.variables,
  funcs: { find: (name: string) => (name === COST_FN ? CHARGE : costedGroup(name)), [Symbol.iterator]: () => ENV.funcs[Symbol.iterator]() },
} as unknown as CelEnv;

/** A copy of the expression whose evaluation charges cel-go's runtime cost of each step. */
function instrument(root: Node): Node {
  let nextId = maxId(root) + 1;
  const constant = (n: number): Node => ({ ...root, id: BigInt(nextId++), exprKind: { case: 'constExpr', value: { constantKind: { case: 'int64Value', value: BigInt(n) } } } } as Node);
  const charged = (e: Node, cost: number): Node =>
    ({ ...root, id: BigInt(nextId++), exprKind: { case: 'callExpr', value: { function: COST_FN, target: undefined, args: [e, constant(cost)] } } } as Node);
  const walk = (e: Node | undefined): Node | undefined => {
    if (!e) return e;
    const k = e.exprKind;
    switch (k.case) {
      case 'identExpr': return charged(e, 1);
      case 'selectExpr': {
        if (k.value.testOnly) return charged({ ...e, exprKind: { case: 'selectExpr', value: { ...k.value, operand: walk(k.value.operand) } } } as Node, 1);
        // A chain of selections on an identifier is one attribute: the identifier and each field cost 1.
        let depth = 0;
        let base: Node | undefined = e;
        while (base?.exprKind.case === 'selectExpr' && !base.exprKind.value.testOnly) {
          depth++;
          base = base.exprKind.value.operand;
        }
        if (base?.exprKind.case === 'identExpr') return charged(e, depth + 1);
        return charged(rebuildChain(e, depth, walk(base)), depth);
      }
      case 'callExpr': {
        const c = k.value;
        const keepTarget = c.target !== undefined && qualifiedFunction(c.target, c.function);
        const call = { ...e, exprKind: { case: 'callExpr', value: { ...c, target: keepTarget ? c.target : walk(c.target), args: c.args.map((a) => walk(a)!) } } } as Node;
        // && || and ?: cost nothing themselves; the planner evaluates these two without a function.
        if (c.function === '@not_strictly_false' || c.function === '_[_]') return charged(call, 1);
        return call;
      }
      case 'listExpr': return charged({ ...e, exprKind: { case: 'listExpr', value: { ...k.value, elements: k.value.elements.map((x) => walk(x)!) } } } as Node, 10);
      case 'structExpr': {
        const entries = k.value.entries.map((en) => ({
          ...en,
          keyKind: en.keyKind.case === 'mapKey' ? { case: 'mapKey' as const, value: walk(en.keyKind.value)! } : en.keyKind,
          value: walk(en.value),
        }));
        return charged({ ...e, exprKind: { case: 'structExpr', value: { ...k.value, entries } } } as Node, k.value.messageName ? 40 : 30);
      }
      case 'comprehensionExpr': {
        const c = k.value;
        return { ...e, exprKind: { case: 'comprehensionExpr', value: {
          ...c, iterRange: walk(c.iterRange), accuInit: walk(c.accuInit), loopCondition: walk(c.loopCondition), loopStep: walk(c.loopStep), result: walk(c.result),
        } } } as Node;
      }
      default: return e;
    }
  };
  return walk(root)!;
}

/** The chain's `depth` selections, over a new base. */
function rebuildChain(e: Node, depth: number, base: Node | undefined): Node {
  if (depth === 0 || e.exprKind.case !== 'selectExpr') return base ?? e;
  return { ...e, exprKind: { case: 'selectExpr', value: { ...e.exprKind.value, operand: rebuildChain(e.exprKind.value.operand!, depth - 1, base) } } } as Node;
}

/** A target like `strings` in strings.quote(x) names a function, not a value: the planner must see it unchanged. */
function qualifiedFunction(target: Node, fn: string): boolean {
  const parts: string[] = [];
  let cur: Node | undefined = target;
  while (cur?.exprKind.case === 'selectExpr') {
    parts.unshift(cur.exprKind.value.field);
    cur = cur.exprKind.value.operand;
  }
  if (cur?.exprKind.case !== 'identExpr') return false;
  return ENV.funcs.find([cur.exprKind.value.name, ...parts, fn].join('.')) !== undefined;
}

function maxId(e: Node | undefined): number {
  if (!e) return 0;
  return Math.max(Number(e.id), ...children(e, new Set()).map(([c]) => maxId(c)));
}


// ---------------------------------------------------------------------------
// Compilation.

/** The variables of x-kubernetes-validations rules and messageExpressions. */
export const RULE_VARIABLES = ['self', 'oldSelf'];

export interface Evaluation {
  /** The value, or the CEL error as an Error (never thrown). */
  result: CelValue | Error;
  /** cel-go's ActualCost: what the steps taken cost, past the limit when it stopped there. */
  cost: number;
  /** The evaluation stopped at the cost limit ("operation cancelled: actual cost limit exceeded"). */
  exceeded: boolean;
}

export interface CompiledExpression {
  /** Evaluates with the given variables, stopping once it has cost more than `limit` (PerCallLimit unless told). */
  run(vars: Record<string, CelInput>, limit?: number): Evaluation;
  /** Evaluates with the given variables under PerCallLimit; a CEL error comes back as an Error, never thrown. */
  evaluate(vars: Record<string, CelInput>): CelValue | Error;
  /** cel-go's EstimateCost, with `self` and `oldSelf` of the given type. */
  estimateCost(self: Decl | undefined): Range;
  /** Whether the expression reads the variable (oldSelf makes a transition rule). */
  references(name: string): boolean;
  /** Each chain of field selections on a variable (`self.spec.url`, has() included), where it starts in the source. */
  selections(): Selection[];
}

export interface Selection {
  variable: string;
  /** Field names in order, each with the source offset the checker reports it at (its "."). */
  fields: { name: string; offset: number }[];
}

export interface SourceError {
  offset: number;
  message: string;
}

/** cel-go's Errors.ToDisplayString for one error: `ERROR: <input>:line:col: message`, the line and a caret. */
export function displayError(source: string, e: SourceError): string {
  const before = [...source.slice(0, e.offset)];
  const lineStart = before.lastIndexOf('\n') + 1;
  const line = before.filter((c) => c === '\n').length + 1;
  const column = before.length - lineStart;
  const snippet = (source.split('\n')[line - 1] ?? '').replace(/\t/g, ' ');
  const dots = [...snippet].slice(0, column).map((c) => (c.length > 1 || c.charCodeAt(0) > 0x7f ? '\uff0e' : '.')).join('');
  return `ERROR: <input>:${line}:${column + 1}: ${e.message}\n | ${snippet}\n | ${dots}^`;
}

const OPERATOR = /^[_@!]/;

/** An expression's sub-expressions, each with the names bound where it sits (a comprehension binds its variables). */
function children(expr: Expr, scope: ReadonlySet<string>): [Expr | undefined, ReadonlySet<string>][] {
  const here = (e: Expr | undefined): [Expr | undefined, ReadonlySet<string>] => [e, scope];
  const k = expr.exprKind;
  switch (k.case) {
    case 'selectExpr': return [here(k.value.operand)];
    case 'callExpr': return [here(k.value.target), ...k.value.args.map(here)];
    case 'listExpr': return k.value.elements.map(here);
    case 'structExpr': return k.value.entries.flatMap((e) => [...(e.keyKind.case === 'mapKey' ? [here(e.keyKind.value)] : []), here(e.value)]);
    case 'comprehensionExpr': {
      const c = k.value;
      const inner = new Set([...scope, c.iterVar, c.iterVar2, c.accuVar].filter(Boolean));
      return [here(c.iterRange), here(c.accuInit), [c.loopCondition, inner], [c.loopStep, inner], [c.result, new Set([...scope, c.accuVar])]];
    }
    default: return [];
  }
}

/** The checker's name resolution, without types: every identifier and function must be declared. */
function undeclaredReferences(expr: Expr | undefined, scope: ReadonlySet<string>, positions: Map<number, number>, out: SourceError[]): void {
  if (!expr) return;
  const undeclared = (name: string): void => {
    out.push({ offset: positions.get(Number(expr.id)) ?? 0, message: `undeclared reference to '${name}' (in container '')` });
  };
  const k = expr.exprKind;
  if (k.case === 'identExpr' && !scope.has(k.value.name)) undeclared(k.value.name);
  if (k.case === 'callExpr' && !OPERATOR.test(k.value.function) && !ENV.funcs.find(k.value.function)) undeclared(k.value.function);
  for (const [e, s] of children(expr, scope)) undeclaredReferences(e, s, positions, out);
}

function referenced(expr: Expr | undefined, name: string): boolean {
  if (!expr) return false;
  if (expr.exprKind.case === 'identExpr') return expr.exprKind.value.name === name;
  return children(expr, new Set()).some(([e]) => referenced(e, name));
}

/** Select chains rooted at an identifier not bound by a comprehension. */
function selectionChains(expr: Expr | undefined, bound: ReadonlySet<string>, positions: Map<number, number>, out: Selection[]): void {
  if (!expr) return;
  if (expr.exprKind.case === 'selectExpr') {
    const fields: Selection['fields'] = [];
    let cur: Expr | undefined = expr;
    while (cur?.exprKind.case === 'selectExpr') {
      fields.unshift({ name: cur.exprKind.value.field, offset: positions.get(Number(cur.id)) ?? 0 });
      cur = cur.exprKind.value.operand;
    }
    if (cur?.exprKind.case === 'identExpr' && !bound.has(cur.exprKind.value.name)) {
      out.push({ variable: cur.exprKind.value.name, fields });
      return;
    }
    selectionChains(cur, bound, positions, out);
    return;
  }
  for (const [e, s] of children(expr, bound)) selectionChains(e, s, positions, out);
}

/** cel-go's "no such key" and friends, for the messages bufbuild/cel words differently. */
function celGoWording(message: string): string {
  const field = /^field not found: (.*)$/.exec(message);
  if (field) return `no such key: ${field[1]}`;
  if (/divide by zero$/.test(message)) return 'division by zero';
  const index = /^index (-?\d+) out of bounds \[0, (\d+)\)$/.exec(message);
  if (index) return `index '${index[1]}' out of range in list size '${index[2]}'`;
  return message;
}

/**
 * Parses and checks an expression over the declared variables. Returns the
 * compiled expression, or the issues as cel-go's Issues.String() prints them.
 */
export function compileExpression(source: string, variables: string[]): CompiledExpression | { issues: string } {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(source);
  } catch (err) {
    const e = err as { rawMessage?: string; message: string; location?: { start?: { offset?: number } } };
    return { issues: displayError(source, { offset: e.location?.start?.offset ?? 0, message: `Syntax error: ${e.rawMessage ?? e.message}` }) };
  }
  const positions = new Map(Object.entries(parsed.sourceInfo?.positions ?? {}).map(([id, off]) => [Number(id), Number(off)]));
  const errors: SourceError[] = [];
  undeclaredReferences(parsed.expr, new Set(variables), positions, errors);
  if (errors.length) {
    errors.sort((a, b) => a.offset - b.offset);
    return { issues: errors.map((e) => displayError(source, e)).join('\n') };
  }
  const program = plan(COSTED_ENV, instrument(parsed.expr!));
  const run = (vars: Record<string, CelInput>, limit = PER_CALL_LIMIT): Evaluation => {
    const outer = tracker;
    const mine: Tracker = { cost: 0, limit };
    tracker = mine;
    try {
      const result = program(vars);
      if (mine.cost > limit) return { result: new Error(COST_LIMIT_EXCEEDED), cost: mine.cost, exceeded: true };
      return { result: isCelError(result) ? new Error(celGoWording(result.message)) : result, cost: mine.cost, exceeded: false };
    } catch (err) {
      return { result: err instanceof Error ? err : new Error(String(err)), cost: mine.cost, exceeded: mine.cost > limit };
    } finally {
      tracker = outer;
    }
  };
  return {
    run,
    evaluate: (vars) => run(vars).result,
    estimateCost: (self) => estimateCost(parsed.expr!, self),
    references: (name) => referenced(parsed.expr, name),
    selections() {
      const out: Selection[] = [];
      selectionChains(parsed.expr, new Set(), positions, out);
      return out;
    },
  };
}

