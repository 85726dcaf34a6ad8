// Small helpers over object metadata shared by the API server, the garbage
// collector and the controllers.
import { randomBytes } from 'node:crypto';
import { klona } from 'klona/json';
import type { KubeObject, StatusCause } from './types.js';

/** RFC 3339 with second precision, as metav1.Time serialises. */
export function rfc3339(d: Date = new Date()): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** RFC 3339 with microsecond precision, as metav1.MicroTime serialises. */
export function rfc3339Micro(d: Date = new Date()): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

const ALNUM = 'bcdfghjklmnpqrstvwxz2456789'; // apimachinery's rand.String alphabet: no vowels, no look-alikes

/** generateName suffix: five characters from apimachinery's alphabet. */
export function randomSuffix(n = 5): string {
  const bytes = randomBytes(n);
  let s = '';
  for (let i = 0; i < n; i++) s += ALNUM[bytes[i]! % ALNUM.length];
  return s;
}

/** A copy of a JSON value (what the store holds); own "__proto__" keys stay keys. Several times faster than structuredClone. */
export function deepCopy<T>(v: T): T {
  return klona(v);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  if (ak.length !== bk.length) return false;
  for (const k of ak) if (!deepEqual(ao[k], bo[k])) return false;
  return true;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Name validation of apimachinery's IsDNS1123Subdomain / IsDNS1123Label, with their messages. */
export function validateName(name: string, field: string, kind: 'subdomain' | 'label'): StatusCause[] {
  const causes: StatusCause[] = [];
  if (kind === 'label') {
    if (name.length > 63) causes.push({ reason: 'FieldValueInvalid', field, message: `Invalid value: "${name}": must be no more than 63 characters` });
    if (!DNS1123_LABEL.test(name)) {
      causes.push({
        reason: 'FieldValueInvalid', field,
        message: `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
      });
    }
    return causes;
  }
  if (name.length > 253) causes.push({ reason: 'FieldValueInvalid', field, message: `Invalid value: "${name}": must be no more than 253 characters` });
  if (!DNS1123_SUBDOMAIN.test(name)) {
    causes.push({
      reason: 'FieldValueInvalid', field,
      message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
    });
  }
  return causes;
}

export function hasFinalizer(obj: KubeObject, f: string): boolean {
  return obj.metadata.finalizers?.includes(f) ?? false;
}

export function withoutFinalizer(obj: KubeObject, f: string): KubeObject {
  const finalizers = (obj.metadata.finalizers ?? []).filter((x) => x !== f);
  const metadata = { ...obj.metadata };
  if (finalizers.length) metadata.finalizers = finalizers;
  else delete metadata.finalizers;
  return { ...obj, metadata };
}
