// The Helm chart against deploy/base, object by object and field by field
// (docs/adr/0019): what `helm template` renders with the chart's defaults
// must be what `kubectl kustomize deploy/base` renders, less what only one of
// them has on purpose:
//   - Helm's own labels (helm.sh/chart, app.kubernetes.io/managed-by, app.kubernetes.io/version)
//     and the pods' checksum/secret annotation, which rolls pods on a chart-made Secret;
//   - the Namespace (kustomize creates it with Pod Security labels; Helm installs into one);
//   - the CRDs' labels (the CRDs themselves are crds/*.yaml in both, test/deploy/kustomize.test.ts).
// Pure functions here; scripts/chart-check.ts runs them on real renderings.
import { isDeepStrictEqual } from 'node:util';
import { parseAllDocuments } from 'yaml';

type Obj = Record<string, unknown>;

const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/version'];
const ONLY_IN_KUSTOMIZE = new Set(['Namespace']);

/** The objects of a multi-document YAML stream, keyed "Kind/name". */
export function objectsOf(yaml: string): Map<string, Obj> {
  const result = new Map<string, Obj>();
  for (const doc of parseAllDocuments(yaml)) {
    const obj = doc.toJSON() as Obj | null;
    if (!obj) continue;
    const meta = obj.metadata as Obj;
    result.set(`${String(obj.kind)}/${String(meta.name)}`, obj);
  }
  return result;
}

/** An object with the differences that are on purpose taken out. */
export function normalise(obj: Obj): Obj {
  const copy = structuredClone(obj);
  const meta = copy.metadata as Obj;
  const labels = meta.labels as Record<string, string> | undefined;
  if (copy.kind === 'CustomResourceDefinition') delete meta.labels;
  else if (labels) for (const key of HELM_LABELS) delete labels[key];
  const template = ((copy.spec as Obj | undefined)?.template as Obj | undefined)?.metadata as Obj | undefined;
  const annotations = template?.annotations as Record<string, string> | undefined;
  if (annotations) {
    delete annotations['checksum/secret'];
    if (!Object.keys(annotations).length) delete template!.annotations;
  }
  return copy;
}

/** Every path where two values differ, as "path: kustomize ≠ chart". */
export function fieldDiffs(a: unknown, b: unknown, path = ''): string[] {
  if (isDeepStrictEqual(a, b)) return [];
  const bothObjects = a && b && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b);
  if (!bothObjects) return [`${path || '.'}: ${JSON.stringify(a)} ≠ ${JSON.stringify(b)}`];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  const out: string[] = [];
  for (const key of [...keys].sort()) {
    const step = Array.isArray(a) ? `${path}[${key}]` : `${path}.${key}`;
    out.push(...fieldDiffs((a as Obj)[key], (b as Obj)[key], step));
  }
  return out;
}

/** The differences between a kustomize rendering and a chart rendering; empty when they agree. */
export function compareRenderings(kustomizeYaml: string, chartYaml: string): string[] {
  const base = objectsOf(kustomizeYaml);
  const chart = objectsOf(chartYaml);
  const out: string[] = [];
  for (const [key, obj] of base) {
    if (ONLY_IN_KUSTOMIZE.has(String(obj.kind))) continue;
    const other = chart.get(key);
    if (!other) out.push(`${key}: only in deploy/base`);
    else out.push(...fieldDiffs(normalise(obj), normalise(other)).map((d) => `${key} ${d}`));
  }
  for (const key of chart.keys()) if (!base.has(key)) out.push(`${key}: only in the chart`);
  return out;
}
