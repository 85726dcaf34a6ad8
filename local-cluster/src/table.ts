// Server-side printing: the meta.k8s.io/v1 Table that list, get and watch
// return when a client asks for `as=Table` (kubectl get always does).
//
// Sources, Kubernetes v1.32:
// - built-in kinds: pkg/printers/internalversion/printers.go. The server always
//   prints "wide" (pkg/printers/storage: GenerateOptions{Wide: true}), so
//   priority>0 columns and their cells are always sent; kubectl hides them
//   unless -o wide.
// - custom resources: apiextensions-apiserver registry/customresource/
//   tableconvertor/tableconvertor.go and serveDefaultColumnsIfEmpty.
// - kinds without a printer (CustomResourceDefinition): apiserver
//   registry/rest/table.go, the default "Name, Created At" convertor.
// - includeObject and PartialObjectMetadata rows: apiserver
//   endpoints/handlers/response.go asTable.
// - durations: apimachinery/pkg/util/duration HumanDuration.
//
// Printer-column JSONPaths are evaluated with jsonpath-plus (safe evaluator),
// which accepts the Kubernetes JSONPath subset CRDs use: `.a.b`, `[0]`, `[*]`,
// `['dotted.key']`, `..x` and `[?(@.type=="Ready")]` filters.
import { JSONPath } from 'jsonpath-plus';
import type { KubeObject, PrinterColumn, ResourceType } from './types.js';

export interface TableOptions {
  /** What each row's `object` holds; kube-apiserver defaults to Metadata. */
  includeObject?: 'None' | 'Metadata' | 'Object';
  resourceVersion?: string;
  continueToken?: string;
  /** false for watch events after the first (TableOptions.noHeaders): columnDefinitions is then null. */
  columnDefinitions?: boolean;
  /** The clock ages are measured against. */
  now?: Date;
}

interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

interface Row {
  cells: unknown[];
  conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
}

interface Printer {
  columns: ColumnDefinition[];
  row(obj: KubeObject, now: number): Row;
}

type Json = Record<string, unknown>;

// Swagger docs of the fields the columns describe (Kubernetes v1.32 texts).
const DOC = {
  name: 'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  creationTimestamp: 'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
  podIP: 'podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.',
  nodeName: 'NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename',
  nominatedNodeName: 'nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.',
  readinessGates: 'If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to "True" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates',
  jobSucceeded: 'The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.',
  jobSelector: 'A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors',
  eventLastTimestamp: 'The time at which the most recent occurrence of this event was recorded.',
  eventType: 'Type of this event (Normal, Warning), new types could be added in the future',
  eventReason: "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
  eventInvolvedObject: 'The object that this event is about.',
  eventFieldPath: 'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: "spec.containers{name}" (where "name" refers to the name of the container that triggered the event) or if no container name is specified "spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.',
  eventSource: 'The component reporting this event. Should be a short machine understandable string.',
  eventMessage: 'A human-readable description of the status of this operation.',
  eventFirstTimestamp: 'The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)',
  eventCount: 'The number of times this event has occurred.',
  secretType: 'Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types',
  secretData: "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
  serviceAccountSecrets: 'Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a "kubernetes.io/enforce-mountable-secrets" annotation set to "true". The "kubernetes.io/enforce-mountable-secrets" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret',
  configMapData: "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
  leaseHolder: 'holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.',
};

function column(name: string, type: string, description: string, extra: { format?: string; priority?: number } = {}): ColumnDefinition {
  return { name, type, format: extra.format ?? '', description, priority: extra.priority ?? 0 };
}

const NAME_COLUMN = column('Name', 'string', DOC.name, { format: 'name' });
const AGE_COLUMN = column('Age', 'string', DOC.creationTimestamp);
const CONTAINERS_COLUMN = column('Containers', 'string', 'Names of each container in the template.', { priority: 1 });
const IMAGES_COLUMN = column('Images', 'string', 'Images referenced by each container in the template.', { priority: 1 });

// ---------------------------------------------------------------- helpers

function obj(value: unknown): Json {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
}

function list(value: unknown): Json[] {
  return Array.isArray(value) ? value.map(obj) : [];
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function num(value: unknown): number {
  return typeof value === 'number' ? value : 0;
}

function count(value: unknown): number {
  if (Array.isArray(value)) return value.length;
  return value && typeof value === 'object' ? Object.keys(value).length : 0;
}

/** metav1.Time / MicroTime parsing (RFC 3339); undefined stands for the zero time. */
function parseTime(value: unknown): number | undefined {
  if (typeof value !== 'string' || !value) return undefined;
  const t = parseRfc3339(value);
  return t === 'invalid' ? undefined : t;
}

/** Go time.Parse(time.RFC3339, s), which also accepts fractional seconds. */
function parseRfc3339(s: string): number | 'invalid' {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.exec(s);
  if (!m) return 'invalid';
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const utc = Date.UTC(year, month - 1, day, hour, minute, second);
  const check = new Date(utc);
  if (check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) return 'invalid';
  const fraction = m[7] ? Number(m[7]) * 1000 : 0;
  const zone = m[8]!;
  const offset = zone === 'Z' ? 0 : (zone.startsWith('-') ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
  return utc + fraction - offset;
}

/**
 * k8s.io/apimachinery/pkg/util/duration.HumanDuration: a short duration with
 * about two significant figures ("45s", "3m20s", "5h3m", "2d5h", "120d", "3y12d").
 */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.trunc(ms / 60_000);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.trunc(ms / 3_600_000);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  const days = Math.trunc(hours / 24);
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${days}d` : `${days}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.trunc(days / 365);
  if (hours < 24 * 365 * 8) {
    const dy = days % 365;
    return dy === 0 ? `${years}y` : `${years}y${dy}d`;
  }
  return `${years}y`;
}

/** translateTimestampSince / ConvertToHumanReadableDateType. */
function since(value: unknown, now: number): string {
  const t = parseTime(value);
  return t === undefined ? '<unknown>' : humanDuration(now - t);
}

function age(o: KubeObject, now: number): string {
  return since(o.metadata.creationTimestamp, now);
}

/** Condition lookup as printers.go hasJobCondition: the first condition of that type decides. */
function conditionTrue(conditions: unknown, type: string): boolean {
  const found = list(conditions).find((c) => c.type === type);
  return found?.status === 'True';
}

/** printers.go layoutContainerCells. */
function containerCells(podSpec: Json): [string, string] {
  const containers = list(podSpec.containers);
  return [containers.map((c) => str(c.name)).join(','), containers.map((c) => str(c.image)).join(',')];
}

const SELECTOR_OPERATORS: Record<string, string> = { In: 'in', NotIn: 'notin', Exists: 'exists', DoesNotExist: '!' };

/** metav1.FormatLabelSelector: requirements sorted by key, "<none>" when empty. */
export function formatLabelSelector(selector: unknown): string {
  if (!selector || typeof selector !== 'object') return '<none>';
  const s = selector as Json;
  const requirements: Array<{ key: string; text: string }> = [];
  for (const [key, value] of Object.entries(obj(s.matchLabels))) requirements.push({ key, text: `${key}=${str(value)}` });
  for (const expr of list(s.matchExpressions)) {
    const key = str(expr.key);
    const op = SELECTOR_OPERATORS[str(expr.operator)];
    if (!op) return '<error>';
    const values = (Array.isArray(expr.values) ? expr.values.map(String) : []).sort();
    if (op === 'exists') requirements.push({ key, text: key });
    else if (op === '!') requirements.push({ key, text: `!${key}` });
    else requirements.push({ key, text: `${key} ${op} (${values.join(',')})` });
  }
  requirements.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return requirements.map((r) => r.text).join(',') || '<none>';
}

// ---------------------------------------------------------------- built-in printers

const POD_SUCCEEDED = [{ type: 'Completed', status: 'True', reason: 'Succeeded', message: 'The pod has completed successfully.' }];
const POD_FAILED = [{ type: 'Completed', status: 'True', reason: 'Failed', message: 'The pod failed.' }];

function isRestartable(container: Json | undefined): boolean {
  return container?.restartPolicy === 'Always';
}

function laterOf(current: number, finishedAt: unknown): number {
  const t = parseTime(finishedAt);
  return t !== undefined && t > current ? t : current;
}

interface PodProgress {
  reason: string;
  ready: number;
  restarts: number;
  lastRestart: number;
}

/** printPod's walk over init containers: stops at the first one not done. */
function initContainerProgress(pod: Json, progress: PodProgress, restartable: PodProgress): boolean {
  const spec = obj(pod.spec);
  const status = obj(pod.status);
  const initSpecs = new Map(list(spec.initContainers).map((c) => [str(c.name), c]));
  const statuses = list(status.initContainerStatuses);
  for (let i = 0; i < statuses.length; i++) {
    const c = statuses[i]!;
    const state = obj(c.state);
    const terminated = state.terminated ? obj(state.terminated) : undefined;
    const waiting = state.waiting ? obj(state.waiting) : undefined;
    const finishedAt = obj(obj(c.lastState).terminated).finishedAt;
    progress.restarts += num(c.restartCount);
    progress.lastRestart = laterOf(progress.lastRestart, finishedAt);
    const isSidecar = isRestartable(initSpecs.get(str(c.name)));
    if (isSidecar) {
      restartable.restarts += num(c.restartCount);
      restartable.lastRestart = laterOf(restartable.lastRestart, finishedAt);
    }
    if (terminated && num(terminated.exitCode) === 0) continue;
    if (isSidecar && c.started === true) {
      if (c.ready === true) progress.ready++;
      continue;
    }
    if (terminated) {
      if (str(terminated.reason)) progress.reason = `Init:${str(terminated.reason)}`;
      else if (num(terminated.signal) !== 0) progress.reason = `Init:Signal:${num(terminated.signal)}`;
      else progress.reason = `Init:ExitCode:${num(terminated.exitCode)}`;
    } else if (waiting && str(waiting.reason) && waiting.reason !== 'PodInitializing') {
      progress.reason = `Init:${str(waiting.reason)}`;
    } else {
      progress.reason = `Init:${i}/${initSpecs.size}`;
    }
    return true;
  }
  return false;
}

/** printPod's walk over app containers, last to first. */
function containerProgress(pod: Json, progress: PodProgress): void {
  const status = obj(pod.status);
  const statuses = list(status.containerStatuses);
  let hasRunning = false;
  for (let i = statuses.length - 1; i >= 0; i--) {
    const c = statuses[i]!;
    const state = obj(c.state);
    const terminated = state.terminated ? obj(state.terminated) : undefined;
    const waiting = state.waiting ? obj(state.waiting) : undefined;
    progress.restarts += num(c.restartCount);
    progress.lastRestart = laterOf(progress.lastRestart, obj(obj(c.lastState).terminated).finishedAt);
    if (waiting && str(waiting.reason)) {
      progress.reason = str(waiting.reason);
    } else if (terminated && str(terminated.reason)) {
      progress.reason = str(terminated.reason);
    } else if (terminated) {
      progress.reason = num(terminated.signal) !== 0 ? `Signal:${num(terminated.signal)}` : `ExitCode:${num(terminated.exitCode)}`;
    } else if (c.ready === true && state.running) {
      hasRunning = true;
      progress.ready++;
    }
  }
  if (progress.reason === 'Completed' && hasRunning) {
    progress.reason = conditionTrue(status.conditions, 'Ready') ? 'Running' : 'NotReady';
  }
}

function podRow(pod: KubeObject, now: number): Row {
  const spec = obj(pod.spec);
  const status = obj(pod.status);
  const phase = str(status.phase);
  let reason = str(status.reason) || phase;
  if (list(status.conditions).some((c) => c.type === 'PodScheduled' && c.reason === 'SchedulingGated')) reason = 'SchedulingGated';
  const total = list(spec.containers).length + list(spec.initContainers).filter(isRestartable).length;

  const progress: PodProgress = { reason, ready: 0, restarts: 0, lastRestart: 0 };
  const restartable: PodProgress = { reason, ready: 0, restarts: 0, lastRestart: 0 };
  const initializing = initContainerProgress(pod, progress, restartable);
  if (!initializing || conditionTrue(status.conditions, 'Initialized')) {
    progress.restarts = restartable.restarts;
    progress.lastRestart = restartable.lastRestart;
    containerProgress(pod, progress);
  }
  if (pod.metadata.deletionTimestamp && status.reason === 'NodeLost') progress.reason = 'Unknown';
  else if (pod.metadata.deletionTimestamp && phase !== 'Succeeded' && phase !== 'Failed') progress.reason = 'Terminating';

  let restarts = String(progress.restarts);
  if (progress.restarts !== 0 && progress.lastRestart !== 0) restarts += ` (${humanDuration(now - progress.lastRestart)} ago)`;

  const podIPs = list(status.podIPs);
  const podIP = str(podIPs[0]?.ip) || str(status.podIP) || '<none>';
  const gates = list(spec.readinessGates);
  const trueGates = gates.filter((g) => conditionTrue(status.conditions, str(g.conditionType))).length;
  const row: Row = {
    cells: [
      pod.metadata.name ?? '', `${progress.ready}/${total}`, progress.reason, restarts, age(pod, now),
      podIP, str(spec.nodeName) || '<none>', str(status.nominatedNodeName) || '<none>',
      gates.length ? `${trueGates}/${gates.length}` : '<none>',
    ],
  };
  if (phase === 'Succeeded') row.conditions = POD_SUCCEEDED;
  if (phase === 'Failed') row.conditions = POD_FAILED;
  return row;
}

function jobStatus(job: KubeObject): string {
  const conditions = obj(job.status).conditions;
  if (conditionTrue(conditions, 'Complete')) return 'Complete';
  if (conditionTrue(conditions, 'Failed')) return 'Failed';
  if (job.metadata.deletionTimestamp) return 'Terminating';
  if (conditionTrue(conditions, 'Suspended')) return 'Suspended';
  if (conditionTrue(conditions, 'FailureTarget')) return 'FailureTarget';
  return 'Running';
}

function jobRow(job: KubeObject, now: number): Row {
  const spec = obj(job.spec);
  const status = obj(job.status);
  const succeeded = num(status.succeeded);
  let completions: string;
  if (typeof spec.completions === 'number') completions = `${succeeded}/${spec.completions}`;
  else if (num(spec.parallelism) > 1) completions = `${succeeded}/1 of ${num(spec.parallelism)}`;
  else completions = `${succeeded}/1`;
  const start = parseTime(status.startTime);
  const end = parseTime(status.completionTime);
  let duration = '';
  if (start !== undefined) duration = humanDuration((end ?? now) - start);
  const [names, images] = containerCells(obj(obj(spec.template).spec));
  return { cells: [job.metadata.name ?? '', jobStatus(job), completions, duration, age(job, now), names, images, formatLabelSelector(spec.selector)] };
}

function eventRow(event: KubeObject, now: number): Row {
  const involved = obj(event.involvedObject);
  const source = obj(event.source);
  const series = event.series ? obj(event.series) : undefined;
  const firstSeen = event.firstTimestamp ? since(event.firstTimestamp, now) : since(event.eventTime, now);
  let lastSeen = event.lastTimestamp ? since(event.lastTimestamp, now) : firstSeen;
  let times = num(event.count);
  if (series) {
    lastSeen = since(series.lastObservedTime, now);
    times = num(series.count);
  } else if (times === 0) {
    times = 1; // singleton events of the events.k8s.io API carry no count
  }
  const kind = str(involved.kind).toLowerCase();
  const target = str(involved.name) ? `${kind}/${str(involved.name)}` : kind;
  const component = str(source.component) || str(event.reportingComponent);
  const host = str(source.host) || str(event.reportingInstance);
  return {
    cells: [
      lastSeen, str(event.type), str(event.reason), target, str(involved.fieldPath),
      host ? `${component}, ${host}` : component, str(event.message).trim(), firstSeen, times, event.metadata.name ?? '',
    ],
  };
}

const BUILTIN_PRINTERS: Record<string, Printer> = {
  '/Pod': {
    columns: [
      NAME_COLUMN,
      column('Ready', 'string', 'The aggregate readiness state of this pod for accepting traffic.'),
      column('Status', 'string', 'The aggregate status of the containers in this pod.'),
      column('Restarts', 'string', 'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.'),
      AGE_COLUMN,
      column('IP', 'string', DOC.podIP, { priority: 1 }),
      column('Node', 'string', DOC.nodeName, { priority: 1 }),
      column('Nominated Node', 'string', DOC.nominatedNodeName, { priority: 1 }),
      column('Readiness Gates', 'string', DOC.readinessGates, { priority: 1 }),
    ],
    row: podRow,
  },
  'batch/Job': {
    columns: [
      NAME_COLUMN,
      column('Status', 'string', 'Status of the job.'),
      column('Completions', 'string', DOC.jobSucceeded),
      column('Duration', 'string', 'Time required to complete the job.'),
      AGE_COLUMN,
      CONTAINERS_COLUMN,
      IMAGES_COLUMN,
      column('Selector', 'string', DOC.jobSelector, { priority: 1 }),
    ],
    row: jobRow,
  },
  'coordination.k8s.io/Lease': {
    columns: [NAME_COLUMN, column('Holder', 'string', DOC.leaseHolder), AGE_COLUMN],
    row: (o, now) => ({ cells: [o.metadata.name ?? '', str(obj(o.spec).holderIdentity), age(o, now)] }),
  },
  '/Namespace': {
    columns: [NAME_COLUMN, column('Status', 'string', 'The status of the namespace'), AGE_COLUMN],
    row: (o, now) => ({ cells: [o.metadata.name ?? '', str(obj(o.status).phase), age(o, now)] }),
  },
  '/Secret': {
    columns: [NAME_COLUMN, column('Type', 'string', DOC.secretType), column('Data', 'string', DOC.secretData), AGE_COLUMN],
    row: (o, now) => ({ cells: [o.metadata.name ?? '', str(o.type), count(o.data), age(o, now)] }),
  },
  '/ConfigMap': {
    columns: [NAME_COLUMN, column('Data', 'string', DOC.configMapData), AGE_COLUMN],
    row: (o, now) => ({ cells: [o.metadata.name ?? '', count(o.data) + count(o.binaryData), age(o, now)] }),
  },
  '/ServiceAccount': {
    columns: [NAME_COLUMN, column('Secrets', 'string', DOC.serviceAccountSecrets), AGE_COLUMN],
    row: (o, now) => ({ cells: [o.metadata.name ?? '', count(o.secrets), age(o, now)] }),
  },
  '/Event': {
    columns: [
      column('Last Seen', 'string', DOC.eventLastTimestamp),
      column('Type', 'string', DOC.eventType),
      column('Reason', 'string', DOC.eventReason),
      column('Object', 'string', DOC.eventInvolvedObject),
      column('Subobject', 'string', DOC.eventFieldPath, { priority: 1 }),
      column('Source', 'string', DOC.eventSource, { priority: 1 }),
      column('Message', 'string', DOC.eventMessage),
      column('First Seen', 'string', DOC.eventFirstTimestamp, { priority: 1 }),
      column('Count', 'string', DOC.eventCount, { priority: 1 }),
      column('Name', 'string', DOC.name, { format: 'name', priority: 1 }),
    ],
    row: eventRow,
  },
};

/** rest.defaultTableConvertor, used for kinds without a printer such as CustomResourceDefinition. */
const DEFAULT_PRINTER: Printer = {
  columns: [NAME_COLUMN, column('Created At', 'date', DOC.creationTimestamp)],
  row: (o) => ({ cells: [o.metadata.name ?? '', formatRfc3339(o.metadata.creationTimestamp)] }),
};

/** time.Time.UTC().Format(time.RFC3339); the zero time formats as 0001-01-01T00:00:00Z. */
function formatRfc3339(value: unknown): string {
  const t = parseTime(value);
  if (t === undefined) return '0001-01-01T00:00:00Z';
  return new Date(Math.floor(t / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

// ---------------------------------------------------------------- custom resources

/** serveDefaultColumnsIfEmpty: a CRD without printer columns gets an Age column. */
const DEFAULT_CRD_COLUMNS: PrinterColumn[] = [
  { name: 'Age', type: 'date', description: DOC.creationTimestamp, jsonPath: '.metadata.creationTimestamp' },
];

function jsonPathValues(path: string, data: unknown): unknown[] {
  try {
    const result: unknown = JSONPath({ path: `$${path}`, json: data as object, wrap: true, eval: 'safe' });
    return Array.isArray(result) ? result : [];
  } catch {
    return [];
  }
}

/** Go's %v for a float64: shortest digits, exponent form outside [1e-4, 1e6). */
function goFloat(n: number): string {
  if (Number.isInteger(n)) return String(n);
  const [mantissa, e] = n.toExponential().split('e') as [string, string];
  const exp = Number(e);
  if (exp < -4 || exp >= 6) return `${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  return String(n);
}

/** encoding/json output: sorted map keys and HTML-safe escapes. */
function goJson(value: unknown): string {
  const sortKeys = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sortKeys);
    if (v && typeof v === 'object') {
      return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Json)[k])]));
    }
    return v;
  };
  return JSON.stringify(sortKeys(value))
    .replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** client-go jsonpath PrintResults for one value: maps and lists as JSON, null as "<no value>". */
function printJsonPathValue(value: unknown): string {
  if (value === null || value === undefined) return '<no value>';
  if (typeof value === 'object') return goJson(value);
  if (typeof value === 'number') return goFloat(value);
  return String(value);
}

/** tableconvertor.go cellForJSONValue: a value of the wrong type prints as null. */
function cellFor(type: string, value: unknown, now: number): unknown {
  if (type === 'string') return printJsonPathValue(value);
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'integer':
      return typeof value === 'number' ? Math.trunc(value) : null;
    case 'number':
      return typeof value === 'number' ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'date': {
      if (typeof value !== 'string') return null;
      if (value === '' || value === 'null') return '<unknown>';
      const t = parseRfc3339(value);
      return t === 'invalid' ? '<invalid>' : humanDuration(now - t);
    }
    default:
      return null;
  }
}

function customResourcePrinter(rt: ResourceType): Printer {
  const printerColumns = rt.printerColumns?.length ? rt.printerColumns : DEFAULT_CRD_COLUMNS;
  const columns = [
    NAME_COLUMN,
    ...printerColumns.map((c) => column(c.name, c.type, c.description || `Custom resource definition column (in JSONPath format): ${c.jsonPath}`, {
      format: c.format, priority: c.priority,
    })),
  ];
  return {
    columns,
    row: (o, now) => ({
      cells: [
        o.metadata.name ?? '',
        ...printerColumns.map((c) => {
          const results = jsonPathValues(c.jsonPath, o);
          // Only the first result counts; no result at all is a null cell.
          return results.length ? cellFor(c.type, results[0], now) : null;
        }),
      ],
    }),
  };
}

function printerFor(rt: ResourceType): Printer {
  if (!rt.builtin) return customResourcePrinter(rt);
  return BUILTIN_PRINTERS[`${rt.group}/${rt.kind}`] ?? DEFAULT_PRINTER;
}

// ---------------------------------------------------------------- table

/** The row object for includeObject (asTable): PartialObjectMetadata by default. */
function rowObject(o: KubeObject, includeObject: TableOptions['includeObject']): unknown {
  switch (includeObject ?? 'Metadata') {
    case 'Object':
      return o;
    case 'None':
      return null; // an empty RawExtension serializes as null
    default:
      return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
  }
}

/** The meta.k8s.io/v1 Table for these objects of one resource type. */
export function toTable(rt: ResourceType, objects: KubeObject[], opts: TableOptions = {}): object {
  const printer = printerFor(rt);
  const now = (opts.now ?? new Date()).getTime();
  const metadata: Record<string, string> = {};
  if (opts.resourceVersion) metadata.resourceVersion = opts.resourceVersion;
  if (opts.continueToken) metadata.continue = opts.continueToken;
  const rows = objects.map((o) => {
    const { cells, conditions } = printer.row(o, now);
    return { cells, ...(conditions ? { conditions } : {}), object: rowObject(o, opts.includeObject) };
  });
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata,
    // With TableOptions.noHeaders the Go slice stays nil and encodes as null.
    columnDefinitions: opts.columnDefinitions === false ? null : printer.columns.map((c) => ({ ...c })),
    rows,
  };
}
