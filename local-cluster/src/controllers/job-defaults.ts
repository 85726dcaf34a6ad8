// batch/v1 Job admission: the defaulting of pkg/apis/batch/v1/defaults.go and
// pkg/apis/core/v1/defaults.go (for the pod template), the selector and
// label generation of pkg/registry/batch/job/strategy.go, and the checks of
// pkg/apis/batch/validation that matter here, with the real field paths and
// messages (the API server turns the causes into a 422 Invalid).
import { deepCopy, deepEqual, isObject, validateName } from '../object-meta.js';
import type { KubeObject, ObjectMeta, StatusCause } from '../types.js';
import type { Container, Job, JobSpec, LabelSelector, PodSpec, PodTemplateSpec, Volume } from './pod-types.js';

export const CONTROLLER_UID_LABEL = 'batch.kubernetes.io/controller-uid';
export const JOB_NAME_LABEL = 'batch.kubernetes.io/job-name';
export const LEGACY_CONTROLLER_UID_LABEL = 'controller-uid';
export const LEGACY_JOB_NAME_LABEL = 'job-name';

/**
 * Default a Job. Call it on create after metadata.name and metadata.uid are
 * set (the generated selector and labels carry the uid), and on update with
 * the stored object as `old` (selectors are only generated at creation).
 */
export function defaultJob(obj: KubeObject, old?: KubeObject): void {
  const job = obj as Job;
  if (!isObject(job.spec)) job.spec = {};
  const spec = job.spec;
  // A non-parallel job may leave both unset; parallelism alone leaves completions unset (work queue).
  if (spec.completions == null && spec.parallelism == null) {
    spec.completions = 1;
    spec.parallelism = 1;
  }
  spec.parallelism ??= 1;
  spec.backoffLimit ??= 6;
  spec.completionMode ??= 'NonIndexed';
  spec.suspend ??= false;
  spec.podReplacementPolicy ??= spec.podFailurePolicy ? 'Failed' : 'TerminatingOrFailed';
  // batch/v1 serializes manualSelector=false as absent.
  if (spec.manualSelector !== true) delete spec.manualSelector;
  for (const k of ['completions', 'activeDeadlineSeconds', 'ttlSecondsAfterFinished'] as const) {
    if (spec[k] === null) delete spec[k];
  }

  if (!isObject(spec.template)) spec.template = {};
  const template = spec.template as PodTemplateSpec;
  if (!isObject(template.metadata)) template.metadata = {};
  if (!isObject(template.spec)) template.spec = {};
  defaultPodSpec(template.spec as PodSpec);

  if (!old && spec.manualSelector !== true) generateSelector(job);

  // SetDefaults_Job runs on every decode, after the generated labels exist:
  // an unlabelled Job shows its template's labels.
  const templateLabels = (template.metadata as ObjectMeta).labels;
  if (templateLabels && Object.keys(job.metadata.labels ?? {}).length === 0) {
    job.metadata.labels = { ...templateLabels };
  }
}

function generateSelector(job: Job): void {
  const spec = job.spec!;
  const meta = spec.template!.metadata!;
  const uid = job.metadata.uid ?? '';
  const name = job.metadata.name ?? '';
  const labels = (meta.labels ??= {});
  // Labels the user set are kept; a conflicting value fails validation.
  for (const k of [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL]) if (!(k in labels)) labels[k] = name;
  for (const k of [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL]) if (!(k in labels)) labels[k] = uid;
  if (!isObject(spec.selector)) spec.selector = {};
  const selector = spec.selector as LabelSelector;
  if (!isObject(selector.matchLabels)) selector.matchLabels = {};
  const matchLabels = selector.matchLabels as Record<string, string>;
  if (!(CONTROLLER_UID_LABEL in matchLabels)) matchLabels[CONTROLLER_UID_LABEL] = uid;
}

/** SetDefaults_PodSpec and the defaults of everything inside it. */
export function defaultPodSpec(spec: PodSpec): void {
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.restartPolicy ??= 'Always';
  spec.securityContext ??= {};
  spec.terminationGracePeriodSeconds ??= 30;
  spec.schedulerName ??= 'default-scheduler';
  for (const list of [spec.initContainers, spec.containers]) {
    if (!Array.isArray(list)) continue;
    for (const c of list) if (isObject(c)) defaultContainer(c);
  }
  if (Array.isArray(spec.volumes)) for (const v of spec.volumes) if (isObject(v)) defaultVolume(v);
}

/** SetDefaults_Pod on top of the pod spec defaults. */
export function defaultPod(pod: KubeObject): void {
  if (!isObject(pod.spec)) pod.spec = {};
  const spec = pod.spec as PodSpec;
  defaultPodSpec(spec);
  spec.enableServiceLinks ??= true;
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    // Requests default to limits on a Pod (not on a template).
    const res = c.resources;
    if (res?.limits) res.requests = { ...res.limits, ...(res.requests ?? {}) };
  }
}

function defaultContainer(c: Container): void {
  if (!c.imagePullPolicy) c.imagePullPolicy = imageTag(c.image ?? '') === 'latest' ? 'Always' : 'IfNotPresent';
  if (!c.terminationMessagePath) c.terminationMessagePath = '/dev/termination-log';
  if (!c.terminationMessagePolicy) c.terminationMessagePolicy = 'File';
  // ResourceRequirements is a struct, never omitted on the wire.
  if (!isObject(c.resources)) c.resources = {};
  for (const p of Array.isArray(c.ports) ? c.ports : []) if (isObject(p)) p.protocol ??= 'TCP';
  for (const e of c.env ?? []) {
    const ref = e?.valueFrom?.fieldRef;
    if (isObject(ref)) ref.apiVersion ??= 'v1';
  }
}

function defaultVolume(v: Volume): void {
  const sources = ['secret', 'configMap', 'emptyDir', 'hostPath', 'downwardAPI', 'projected', 'persistentVolumeClaim', 'nfs', 'csi', 'ephemeral', 'image'];
  if (!sources.some((k) => v[k] !== undefined)) v.emptyDir = {};
  if (isObject(v.secret)) v.secret.defaultMode ??= 0o644;
  if (isObject(v.configMap)) v.configMap.defaultMode ??= 0o644;
  if (isObject(v.downwardAPI)) v.downwardAPI.defaultMode ??= 0o644;
  if (isObject(v.projected)) v.projected.defaultMode ??= 0o644;
  if (isObject(v.hostPath)) v.hostPath.type ??= '';
}

/** The tag of an image reference as parsers.ParseImageName sees it: "latest" when none, "" with a digest. */
export function imageTag(image: string): string {
  if (image.includes('@')) return '';
  const lastSlash = image.lastIndexOf('/');
  const colon = image.indexOf(':', lastSlash + 1);
  return colon >= 0 ? image.slice(colon + 1) : 'latest';
}

// ---- validation ----------------------------------------------------------------

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const ENV_VAR_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

export const invalidCause = (field: string, value: string, detail: string): StatusCause => ({ reason: 'FieldValueInvalid', field, message: `Invalid value: ${value}: ${detail}` });
export const required = (field: string, detail = ''): StatusCause => ({ reason: 'FieldValueRequired', field, message: detail ? `Required value: ${detail}` : 'Required value' });
const notSupported = (field: string, value: string, supported: string[]): StatusCause => ({
  reason: 'FieldValueNotSupported', field, message: `Unsupported value: ${goQuote(value)}: supported values: ${supported.map(goQuote).join(', ')}`,
});

/** Validate a (defaulted) Job; `old` is the stored object on update. */
export function validateJob(obj: KubeObject, old?: KubeObject): StatusCause[] {
  const job = obj as Job;
  const oldJob = old as Job | undefined;
  const spec: JobSpec = isObject(job.spec) ? job.spec : {};
  const causes: StatusCause[] = [];

  // Generated selectors must still be what generation produced.
  if (spec.manualSelector !== true && spec.selector) {
    causes.push(...validateGeneratedSelector(job, oldJob));
  }

  for (const k of ['parallelism', 'completions', 'activeDeadlineSeconds', 'backoffLimit', 'ttlSecondsAfterFinished'] as const) {
    const v = spec[k];
    if (typeof v === 'number' && v < 0) causes.push(invalidCause(`spec.${k}`, String(v), 'must be greater than or equal to 0'));
  }
  const mode = spec.completionMode ?? 'NonIndexed';
  if (mode !== 'NonIndexed' && mode !== 'Indexed') {
    causes.push(notSupported('spec.completionMode', mode, ['NonIndexed', 'Indexed']));
  } else if (mode === 'Indexed' && spec.completions == null) {
    causes.push(required('spec.completions', 'when completion mode is Indexed'));
  }
  const replacement = spec.podReplacementPolicy;
  if (replacement != null && replacement !== 'TerminatingOrFailed' && replacement !== 'Failed') {
    causes.push(notSupported('spec.podReplacementPolicy', replacement, ['Failed', 'TerminatingOrFailed']));
  }

  if (!spec.selector) {
    causes.push(required('spec.selector'));
  } else {
    causes.push(...validateSelector(spec.selector, 'spec.selector'));
  }
  const templateLabels = spec.template?.metadata?.labels ?? {};
  if (spec.selector && !selectorMatches(spec.selector, templateLabels)) {
    causes.push(invalidCause('spec.template.metadata.labels', goMap(templateLabels), '`selector` does not match template `labels`'));
  }
  causes.push(...validateLabels(templateLabels, 'spec.template.labels'));

  const podSpec: PodSpec = spec.template?.spec ?? {};
  causes.push(...validatePodSpec(podSpec, 'spec.template.spec'));
  const restartPolicy = podSpec.restartPolicy ?? '';
  if (restartPolicy !== 'OnFailure' && restartPolicy !== 'Never') {
    causes.push(notSupported('spec.template.spec.restartPolicy', restartPolicy, ['OnFailure', 'Never']));
  }

  if (oldJob) causes.push(...validateJobSpecUpdate(spec, oldJob));
  return dedupe(causes);
}

function validateGeneratedSelector(job: Job, old: Job | undefined): StatusCause[] {
  const causes: StatusCause[] = [];
  const uid = job.metadata.uid ?? '';
  const name = job.metadata.name ?? '';
  if (!uid) causes.push(required('metadata.uid'));
  const labels = job.spec?.template?.metadata?.labels ?? {};
  const hasLabel = (key: string, expected: string) => {
    const field = `spec.template.metadata.labels[${key}]`;
    if (!(key in labels)) causes.push(required(field, expected));
    else if (labels[key] !== expected) causes.push(invalidCause(field, goMap(labels), `must be '${expected}'`));
  };
  hasLabel(LEGACY_CONTROLLER_UID_LABEL, uid);
  hasLabel(LEGACY_JOB_NAME_LABEL, name);
  // Jobs created before the prefixed labels existed may keep going without them.
  const oldLabels = old?.spec?.template?.metadata?.labels;
  const requirePrefixed = !old || (oldLabels !== undefined && JOB_NAME_LABEL in oldLabels && CONTROLLER_UID_LABEL in oldLabels);
  if (requirePrefixed) {
    hasLabel(CONTROLLER_UID_LABEL, uid);
    hasLabel(JOB_NAME_LABEL, name);
  }
  const expected: Record<string, string> = { [LEGACY_CONTROLLER_UID_LABEL]: uid, [LEGACY_JOB_NAME_LABEL]: name };
  if (requirePrefixed) {
    expected[CONTROLLER_UID_LABEL] = uid;
    expected[JOB_NAME_LABEL] = name;
  }
  if (job.spec?.selector && !selectorMatches(job.spec.selector, expected)) {
    causes.push(invalidCause('spec.selector', goLabelSelector(job.spec.selector), '`selector` not auto-generated'));
  }
  return causes;
}

function validateJobSpecUpdate(spec: JobSpec, old: Job): StatusCause[] {
  const causes: StatusCause[] = [];
  const oldSpec = old.spec ?? {};
  const immutable = (field: string, a: unknown, b: unknown, render: (v: unknown) => string) => {
    if (!deepEqual(a ?? null, b ?? null)) causes.push(invalidCause(field, render(a), 'field is immutable'));
  };
  const isIndexed = spec.completionMode === 'Indexed';
  if (!isIndexed) {
    immutable('spec.completions', spec.completions, oldSpec.completions, goScalar);
  } else if (!deepEqual(spec.completions, oldSpec.completions) && spec.completions != null && spec.completions !== spec.parallelism) {
    // Elastic Indexed Jobs scale completions together with parallelism.
    causes.push(invalidCause('spec.completions', String(spec.completions), 'can only be modified in tandem with spec.parallelism'));
  }
  immutable('spec.selector', spec.selector, oldSpec.selector, (v) => goLabelSelector(v as LabelSelector | undefined));
  // A suspended Job that never started may still have its scheduling directives changed.
  let oldTemplate = oldSpec.template ?? {};
  const newTemplate = spec.template ?? {};
  if (oldSpec.suspend === true && !old.status?.startTime) {
    const t = deepCopy(oldTemplate);
    t.metadata = { ...(t.metadata ?? {}), labels: newTemplate.metadata?.labels, annotations: newTemplate.metadata?.annotations };
    const ps = (t.spec ??= {});
    for (const k of ['affinity', 'nodeSelector', 'tolerations', 'schedulingGates']) ps[k] = newTemplate.spec?.[k];
    oldTemplate = t;
  }
  immutable('spec.template', newTemplate, oldTemplate, (v) => goValue(v, 'core.PodTemplateSpec'));
  immutable('spec.completionMode', spec.completionMode, oldSpec.completionMode, goScalar);
  immutable('spec.podFailurePolicy', spec.podFailurePolicy, oldSpec.podFailurePolicy, (v) => goValue(v, 'batch.PodFailurePolicy'));
  immutable('spec.managedBy', spec.managedBy, oldSpec.managedBy, goScalar);
  return causes;
}

/** The checks of a pod spec that decide whether it can run at all. */
export function validatePodSpec(spec: PodSpec, path: string): StatusCause[] {
  const causes: StatusCause[] = [];
  const containers = spec.containers;
  const volumeNames = new Set<string>();
  (spec.volumes ?? []).forEach((v, i) => {
    const field = `${path}.volumes[${i}].name`;
    if (!v?.name) causes.push(required(field));
    else if (volumeNames.has(v.name)) causes.push({ reason: 'FieldValueDuplicate', field, message: `Duplicate value: ${goQuote(v.name)}` });
    else {
      causes.push(...validateName(v.name, field, 'label'));
      volumeNames.add(v.name);
    }
  });
  const names = new Set<string>();
  const checkContainers = (list: Container[] | undefined, listPath: string) => {
    (list ?? []).forEach((c, i) => {
      const p = `${listPath}[${i}]`;
      if (!isObject(c)) {
        causes.push(required(p));
        return;
      }
      if (!c.name) causes.push(required(`${p}.name`));
      else if (names.has(c.name)) causes.push({ reason: 'FieldValueDuplicate', field: `${p}.name`, message: `Duplicate value: ${goQuote(c.name)}` });
      else {
        causes.push(...validateName(c.name, `${p}.name`, 'label'));
        names.add(c.name);
      }
      if (!c.image) causes.push(required(`${p}.image`));
      (c.env ?? []).forEach((e, j) => {
        const f = `${p}.env[${j}].name`;
        if (!e?.name) causes.push(required(f));
        else if (!ENV_VAR_NAME.test(e.name)) {
          causes.push(invalidCause(f, goQuote(e.name), `a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')`));
        }
      });
      (c.volumeMounts ?? []).forEach((m, j) => {
        const f = `${p}.volumeMounts[${j}]`;
        if (!m?.name) causes.push(required(`${f}.name`));
        else if (!volumeNames.has(m.name)) causes.push({ reason: 'FieldValueNotFound', field: `${f}.name`, message: `Not found: ${goQuote(m.name)}` });
        if (!m?.mountPath) causes.push(required(`${f}.mountPath`));
      });
      const policy = c.terminationMessagePolicy;
      if (policy !== undefined && policy !== 'File' && policy !== 'FallbackToLogsOnError') {
        causes.push(notSupported(`${p}.terminationMessagePolicy`, String(policy), ['File', 'FallbackToLogsOnError']));
      }
    });
  };
  checkContainers(spec.initContainers, `${path}.initContainers`);
  if (!Array.isArray(containers) || containers.length === 0) causes.push(required(`${path}.containers`));
  else checkContainers(containers, `${path}.containers`);
  return causes;
}

/** Validation of a bare Pod on create (the template checks plus a restart policy). */
export function validatePod(pod: KubeObject): StatusCause[] {
  const spec = (isObject(pod.spec) ? pod.spec : {}) as PodSpec;
  const causes = validatePodSpec(spec, 'spec');
  const policy = spec.restartPolicy ?? '';
  if (!['Always', 'OnFailure', 'Never'].includes(policy)) causes.push(notSupported('spec.restartPolicy', policy, ['Always', 'OnFailure', 'Never']));
  return dedupe(causes);
}

function validateLabels(labels: Record<string, string>, field: string): StatusCause[] {
  const causes: StatusCause[] = [];
  for (const [k, v] of Object.entries(labels)) {
    causes.push(...validateQualifiedName(k, field));
    const value = String(v);
    if (value.length > 63) causes.push(invalidCause(field, goQuote(value), 'must be no more than 63 characters'));
    if (!LABEL_VALUE.test(value)) {
      causes.push(invalidCause(field, goQuote(value), `a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`));
    }
  }
  return causes;
}

function validateQualifiedName(key: string, field: string): StatusCause[] {
  const causes: StatusCause[] = [];
  const parts = key.split('/');
  let name = key;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    name = parts[1]!;
    if (prefix.length === 0) causes.push(invalidCause(field, goQuote(key), 'prefix part must be non-empty'));
    else if (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)) {
      causes.push(invalidCause(field, goQuote(key), `prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`));
    }
  } else if (parts.length > 2) {
    causes.push(invalidCause(field, goQuote(key), `a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`));
    return causes;
  }
  if (name.length === 0) causes.push(invalidCause(field, goQuote(key), 'name part must be non-empty'));
  else {
    if (name.length > 63) causes.push(invalidCause(field, goQuote(key), 'name part must be no more than 63 characters'));
    if (!QUALIFIED_NAME.test(name)) {
      causes.push(invalidCause(field, goQuote(key), `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`));
    }
  }
  return causes;
}

export function validateSelector(sel: LabelSelector, field: string): StatusCause[] {
  const causes: StatusCause[] = [];
  causes.push(...validateLabels(sel.matchLabels ?? {}, `${field}.matchLabels`));
  (sel.matchExpressions ?? []).forEach((e, i) => {
    const p = `${field}.matchExpressions[${i}]`;
    const op = e?.operator ?? '';
    const values = e?.values ?? [];
    if (op === 'In' || op === 'NotIn') {
      if (values.length === 0) causes.push(required(`${p}.values`, 'must be specified when `operator` is \'In\' or \'NotIn\''));
    } else if (op === 'Exists' || op === 'DoesNotExist') {
      if (values.length > 0) causes.push({ reason: 'FieldValueForbidden', field: `${p}.values`, message: 'Forbidden: may not be specified when `operator` is \'Exists\' or \'DoesNotExist\'' });
    } else {
      causes.push(invalidCause(`${p}.operator`, goQuote(op), 'not a valid selector operator'));
    }
    causes.push(...validateQualifiedName(e?.key ?? '', `${p}.key`));
  });
  return causes;
}

/** Does a LabelSelector match a label set (metav1.LabelSelectorAsSelector)? An empty selector matches everything. */
export function selectorMatches(sel: LabelSelector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = e.key !== undefined && e.key in labels;
    const value = e.key !== undefined ? labels[e.key] : undefined;
    switch (e.operator) {
      case 'In': if (!has || !(e.values ?? []).includes(value!)) return false; break;
      case 'NotIn': if (has && (e.values ?? []).includes(value!)) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
      default: return false;
    }
  }
  return true;
}

/** apimachinery's ErrorList.ToAggregate drops repeated messages; the causes follow suit. */
function dedupe(causes: StatusCause[]): StatusCause[] {
  const seen = new Set<string>();
  return causes.filter((c) => {
    const k = `${c.field}\u0000${c.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

// ---- Go value rendering for "Invalid value: ..." ------------------------------
// field.Error prints strings with %q, numbers plainly and structs with %#v.

function goQuote(s: string): string {
  return JSON.stringify(s);
}

function goScalar(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  return typeof v === 'string' ? goQuote(v) : String(v);
}

export function goMap(m: Record<string, string> | undefined): string {
  if (!m) return 'map[string]string(nil)';
  return `map[string]string{${Object.keys(m).sort().map((k) => `${goQuote(k)}:${goQuote(String(m[k]))}`).join(', ')}}`;
}

function goLabelSelector(sel: LabelSelector | undefined): string {
  if (!sel) return 'null';
  const exprs = sel.matchExpressions
    ? `[]v1.LabelSelectorRequirement{${sel.matchExpressions.map((e) => `v1.LabelSelectorRequirement{Key:${goQuote(e.key ?? '')}, Operator:${goQuote(e.operator ?? '')}, Values:${e.values ? `[]string{${e.values.map(goQuote).join(', ')}}` : '[]string(nil)'}}`).join(', ')}}`
    : '[]v1.LabelSelectorRequirement(nil)';
  return `v1.LabelSelector{MatchLabels:${goMap(sel.matchLabels)}, MatchExpressions:${exprs}}`;
}

/**
 * A Go-syntax rendering of a JSON value for large structs (the pod template).
 * Go would print every zero-valued field of the internal type as well; this
 * keeps the shape (type name, field names, values) without them.
 */
function goValue(v: unknown, typeName = ''): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return goQuote(v);
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return `[]{${v.map((x) => goValue(x)).join(', ')}}`;
  const fields = Object.entries(v as Record<string, unknown>).map(([k, x]) => `${k.charAt(0).toUpperCase()}${k.slice(1)}:${goValue(x)}`);
  return `${typeName}{${fields.join(', ')}}`;
}
