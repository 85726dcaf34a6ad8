// Per-kind create/update behaviour of the built-in kinds: the defaulting,
// status reset and validation that each kind's registry strategy does in
// kube-apiserver (pkg/registry/<group>/<kind>/strategy.go).
import { badRequest } from './errors.js';
import { defaultJob, defaultPod, validateJob, validatePod } from './controllers/job-defaults.js';
import { validateDeployment } from './deploy-validation.js';
import { isObject } from './object-meta.js';
import type { KubeObject, StatusCause } from './types.js';

export interface Strategy {
  /** Name rule of metadata.name. */
  nameKind: 'subdomain' | 'label';
  /** Decode-time checks that fail with 400, before anything else. */
  decode?(obj: KubeObject): void;
  prepareForCreate?(obj: KubeObject): void;
  prepareForUpdate?(obj: KubeObject, old: KubeObject): void;
  validate?(obj: KubeObject, old?: KubeObject): StatusCause[];
}

const MICRO_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?(.*)$/;
const MICRO_LAYOUT = '2006-01-02T15:04:05.000000Z07:00';

/**
 * metav1.MicroTime accepts exactly six fractional digits. client-node
 * serialises a plain Date with three, which a real apiserver rejects; so do we,
 * with Go's time.ParseError wording.
 */
export function checkMicroTime(kind: string, value: unknown): void {
  if (value === undefined || value === null) return;
  const str = String(value);
  const fail = (valueElem: string, layoutElem: string) => {
    throw badRequest(`${kind} in version "v1" cannot be handled as a ${kind}: parsing time "${str}" as "${MICRO_LAYOUT}": cannot parse "${valueElem}" as "${layoutElem}"`);
  };
  const m = MICRO_TIME.exec(str);
  if (!m) return fail(str, '2006');
  const frac = m[2] ?? '';
  if (frac.length !== 7) return fail(str.slice(m[1]!.length), '.000000');
  if (!m[3] || m[4]) return fail(str.slice(m[1]!.length + 7), 'Z07:00');
}

const namespaceStrategy: Strategy = {
  nameKind: 'label',
  prepareForCreate(obj) {
    const name = obj.metadata.name!;
    obj.metadata.labels = { ...(obj.metadata.labels ?? {}), 'kubernetes.io/metadata.name': name };
    obj.spec = { finalizers: ['kubernetes'] };
    obj.status = { phase: 'Active' };
  },
  prepareForUpdate(obj, old) {
    obj.metadata.labels = { ...(obj.metadata.labels ?? {}), 'kubernetes.io/metadata.name': old.metadata.name! };
    obj.spec = old.spec;
  },
};

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const secretStrategy: Strategy = {
  nameKind: 'subdomain',
  decode(obj) {
    const data = obj.data;
    if (data !== undefined && !isObject(data)) throw badRequest('Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal into Go struct field Secret.data of type map[string][]uint8');
    for (const [k, v] of Object.entries((data as Record<string, unknown>) ?? {})) {
      // Go's base64 decoder skips \r and \n (kustomize's secretGenerator wraps at 76 columns); the value is
      // stored as bytes and served re-encoded, without them.
      const clean = typeof v === 'string' ? v.replace(/[\r\n]/g, '') : v;
      if (typeof clean !== 'string' || clean.length % 4 !== 0 || !BASE64.test(clean)) {
        throw badRequest(`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0 (key "${k}")`);
      }
      (data as Record<string, unknown>)[k] = clean;
    }
  },
  prepareForCreate: foldStringData,
  prepareForUpdate: foldStringData,
  validate(obj) {
    const causes: StatusCause[] = [];
    let size = 0;
    for (const [k, v] of Object.entries((obj.data as Record<string, string>) ?? {})) {
      if (!/^[-._a-zA-Z0-9]+$/.test(k)) {
        causes.push({ reason: 'FieldValueInvalid', field: `data[${k}]`, message: `Invalid value: "${k}": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')` });
      }
      size += Buffer.byteLength(v, 'base64');
    }
    if (size > 1024 * 1024) causes.push({ reason: 'FieldValueTooLong', field: 'data', message: 'Too long: may not be more than 1048576 bytes' });
    return causes;
  },
};

/** stringData is write-only sugar: merged into data (base64) and dropped, as the Secret strategy does. */
function foldStringData(obj: KubeObject): void {
  if (!obj.type) obj.type = 'Opaque';
  const sd = obj.stringData;
  if (isObject(sd)) {
    const data = { ...((obj.data as Record<string, string>) ?? {}) };
    for (const [k, v] of Object.entries(sd)) data[k] = Buffer.from(String(v), 'utf8').toString('base64');
    obj.data = data;
  }
  delete obj.stringData;
}

const podStrategy: Strategy = {
  nameKind: 'subdomain',
  prepareForCreate(obj) {
    defaultPod(obj);
    obj.status = { phase: 'Pending', qosClass: 'BestEffort' };
  },
  prepareForUpdate(obj, old) {
    // Pod spec is immutable but for binding: the kubelet (our scheduler) sets nodeName once.
    const oldSpec = (old.spec ?? {}) as Record<string, unknown>;
    const newSpec = isObject(obj.spec) ? obj.spec : {};
    obj.spec = oldSpec.nodeName || !newSpec.nodeName ? old.spec : { ...oldSpec, nodeName: newSpec.nodeName };
  },
  validate: (obj) => validatePod(obj),
};

const jobStrategy: Strategy = {
  nameKind: 'subdomain',
  prepareForCreate(obj) {
    defaultJob(obj);
    obj.status = {};
  },
  prepareForUpdate(obj, old) {
    // The selector is generated only on create; an update must carry the stored one.
    defaultJob(obj, old);
  },
  validate: (obj, old) => validateJob(obj, old),
};

const leaseStrategy: Strategy = {
  nameKind: 'subdomain',
  decode(obj) {
    const spec = obj.spec;
    if (!isObject(spec)) return;
    checkMicroTime('Lease', spec.acquireTime);
    checkMicroTime('Lease', spec.renewTime);
  },
};

const plain: Strategy = { nameKind: 'subdomain' };

const eventStrategy: Strategy = {
  nameKind: 'subdomain',
  decode(obj) {
    checkMicroTime('Event', obj.eventTime);
  },
};

export const STRATEGIES: Record<string, Strategy> = {
  Namespace: namespaceStrategy,
  Secret: secretStrategy,
  ConfigMap: plain,
  ServiceAccount: plain,
  Event: eventStrategy,
  Pod: podStrategy,
  Job: jobStrategy,
  Lease: leaseStrategy,
  // Deploy-time kinds: stored only; Deployments get the selector and pod template checks.
  Deployment: { nameKind: 'subdomain', validate: (obj) => validateDeployment(obj) },
  // Service names are DNS-1035 labels; 'label' (RFC 1123) is the closest rule here.
  Service: { nameKind: 'label' },
};
