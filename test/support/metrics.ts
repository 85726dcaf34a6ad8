// Reading a Prometheus /metrics answer as a scraper does: the exposition
// text parsed into samples, so tests assert on names, labels and values.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export class Scrape {
  constructor(readonly samples: readonly Sample[], readonly text: string) {}

  /** Samples of `name` whose labels include `labels`. */
  find(name: string, labels: Record<string, string> = {}): Sample[] {
    return this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  }

  /** The sum of the matching samples' values (0 when none match). */
  value(name: string, labels: Record<string, string> = {}): number {
    return this.find(name, labels).reduce((sum, s) => sum + s.value, 0);
  }

  /** Every label name used by samples whose name starts with `prefix`. */
  labelNames(prefix = ''): Set<string> {
    return new Set(this.samples.filter((s) => s.name.startsWith(prefix)).flatMap((s) => Object.keys(s.labels)));
  }
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The samples of an exposition text (text format 0.0.4); HELP, TYPE and blank lines skipped. */
export function parseExposition(text: string): Scrape {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(LABEL)) labels[k!] = v!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return new Scrape(samples, text);
}

/** GET `url` (a /metrics address) and parse it; throws unless it answers 200 with the exposition content type. */
export async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 200)}`);
  if (!res.headers.get('content-type')?.startsWith('text/plain')) throw new Error(`${url}: content type ${res.headers.get('content-type')}`);
  return parseExposition(text);
}

/**
 * The q-quantile (0 < q <= 1) of a histogram's samples (`<name>_bucket`)
 * matching `labels`, interpolated within its bucket as PromQL's
 * histogram_quantile does; NaN when it counted nothing.
 */
export function histogramQuantile(m: Scrape, name: string, q: number, labels: Record<string, string> = {}): number {
  const byLe = new Map<number, number>();
  for (const s of m.find(`${name}_bucket`, labels)) {
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  const buckets = [...byLe].sort((a, b) => a[0] - b[0]);
  const total = buckets.at(-1)?.[1] ?? 0;
  if (!total) return NaN;
  const rank = q * total;
  let [lower, below] = [0, 0];
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return lower;
      return lower + ((le - lower) * (rank - below)) / Math.max(1, count - below);
    }
    [lower, below] = [le, count];
  }
  return lower;
}
