// `$(VAR)` expansion exactly as the kubelet does it for env values, command
// and args (kubernetes third_party/forked/golang/expansion): `$$` escapes a
// `$`, unknown or malformed references are left as written, shell syntax such
// as `$VAR` or `${VAR}` is not touched.

/** Expand `$(NAME)` references in `input`; `lookup` returns undefined for unknown names. */
export function expand(input: string, lookup: (name: string) => string | undefined): string {
  let out = '';
  let checkpoint = 0;
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] !== '$' || cursor + 1 >= input.length) continue;
    out += input.slice(checkpoint, cursor);
    const { read, isVar, advance } = readVariableName(input.slice(cursor + 1));
    if (isVar) {
      const value = lookup(read);
      out += value === undefined ? `$(${read})` : value;
    } else {
      out += read;
    }
    cursor += advance;
    checkpoint = cursor + 1;
  }
  return out + input.slice(checkpoint);
}

function readVariableName(rest: string): { read: string; isVar: boolean; advance: number } {
  // Code points, not UTF-16 units, mirror Go's utf8.DecodeRuneInString.
  const first = String.fromCodePoint(rest.codePointAt(0)!);
  if (first === '$') return { read: '$', isVar: false, advance: 1 };
  if (first === '(') {
    const close = rest.indexOf(')', 1);
    if (close >= 0) return { read: rest.slice(1, close), isVar: true, advance: close + 1 };
    return { read: '$(', isVar: false, advance: 1 };
  }
  return { read: '$' + first, isVar: false, advance: first.length };
}

/** A lookup over several maps, first match wins (expansion.MappingFuncFor). */
export function mappingFor(...contexts: ReadonlyArray<Record<string, string> | Map<string, string>>): (name: string) => string | undefined {
  return (name) => {
    for (const ctx of contexts) {
      if (ctx instanceof Map) {
        if (ctx.has(name)) return ctx.get(name);
      } else if (Object.prototype.hasOwnProperty.call(ctx, name)) {
        return ctx[name];
      }
    }
    return undefined;
  };
}
