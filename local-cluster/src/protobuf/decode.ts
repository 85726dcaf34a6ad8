// Decodes a message of messages.ts into the JSON a Go client would have sent
// for the same object, so that a protobuf body goes through the same create
// and update pipeline as a JSON one. The rules follow what Go does on both
// sides: the generated Unmarshal (unknown numbers skipped, repeated message
// fields merged), then encoding/json (omitempty drops zero scalars, empty
// lists and maps, never structs; metav1.Time writes its zero as null).
import { MESSAGES } from './messages.js';
import { ProtobufError, Reader, WireType } from './wire.js';

const SCALARS = new Set(['s', 'b', 'i32', 'i64', 'f64', 'y', 't', 'mt', 'q', 'ios', 'fv1']);

interface FieldSpec {
  json: string;
  type: string;
  repeated: boolean;
  map: boolean;
  inline: boolean;
  keepZero: boolean;
}

type Table = ReadonlyMap<number, FieldSpec>;

let tables: ReadonlyMap<string, Table> | undefined;

/** Parses messages.ts once, and checks that every message a field names exists. */
export function messageTables(): ReadonlyMap<string, Table> {
  if (tables) return tables;
  const parsed = new Map<string, Map<number, FieldSpec>>();
  for (const [name, spec] of Object.entries(MESSAGES)) {
    const table = new Map<number, FieldSpec>();
    for (const entry of spec.split(',').map((e) => e.trim())) {
      const m = /^([\w-]+)=(\d+) (\[\]|\{\}|\^)?(\w+)(\*)?$/.exec(entry);
      if (!m) throw new Error(`messages.ts: ${name}: cannot parse "${entry}"`);
      const num = Number(m[2]);
      if (table.has(num)) throw new Error(`messages.ts: ${name}: field number ${num} twice`);
      table.set(num, { json: m[1]!, type: m[4]!, repeated: m[3] === '[]', map: m[3] === '{}', inline: m[3] === '^', keepZero: m[5] === '*' });
    }
    parsed.set(name, table);
  }
  for (const [name, table] of parsed) {
    for (const f of table.values()) {
      if (!SCALARS.has(f.type) && !parsed.has(f.type)) throw new Error(`messages.ts: ${name}.${f.json} names unknown type ${f.type}`);
      if (f.inline && SCALARS.has(f.type)) throw new Error(`messages.ts: ${name}.${f.json}: only a message can be inlined`);
    }
  }
  tables = parsed;
  return parsed;
}

/** Decodes `buf` as message `name` into `into` (merging, as Go's Unmarshal does). */
export function decodeMessage(buf: Buffer, name: string, into: Record<string, unknown> = {}): Record<string, unknown> {
  const table = messageTables().get(name);
  if (!table) throw new Error(`no message ${name}`);
  const r = new Reader(buf);
  while (!r.done) {
    const { num, wireType } = r.key();
    const f = table.get(num);
    if (!f) {
      r.skip(wireType);
      continue;
    }
    if (f.map) {
      expectWire(wireType, WireType.LengthDelimited, name, f);
      const [key, value] = decodeMapEntry(r.bytes(), name, f);
      const map = (into[f.json] ??= {}) as Record<string, unknown>;
      map[key] = value;
    } else if (f.inline) {
      expectWire(wireType, WireType.LengthDelimited, name, f);
      decodeMessage(r.bytes(), f.type, into);
    } else if (f.repeated) {
      const list = (into[f.json] ??= []) as unknown[];
      if (wireType === WireType.LengthDelimited && isPackable(f.type)) {
        // proto2 writes repeated numbers unpacked, but a packed run is valid input too.
        const packed = new Reader(r.bytes());
        while (!packed.done) list.push(decodeValue(packed, packableWire(f.type), name, f));
      } else {
        list.push(decodeValue(r, wireType, name, f));
      }
    } else if (!SCALARS.has(f.type)) {
      expectWire(wireType, WireType.LengthDelimited, name, f);
      const existing = into[f.json];
      into[f.json] = decodeMessage(r.bytes(), f.type, isRecord(existing) ? existing : {});
    } else {
      const value = decodeValue(r, wireType, name, f);
      // A later occurrence overwrites an earlier one, also with a zero value.
      if (!f.keepZero && isZero(value)) delete into[f.json];
      else into[f.json] = value;
    }
  }
  return into;
}

function decodeMapEntry(buf: Buffer, message: string, f: FieldSpec): [string, unknown] {
  const r = new Reader(buf);
  let key = '';
  let value: unknown = zeroOf(f.type);
  while (!r.done) {
    const entry = r.key();
    if (entry.num === 1) {
      expectWire(entry.wireType, WireType.LengthDelimited, message, f);
      key = r.bytes().toString('utf8');
    } else if (entry.num === 2) {
      value = decodeValue(r, entry.wireType, message, f);
    } else {
      r.skip(entry.wireType);
    }
  }
  return [key, value];
}

function decodeValue(r: Reader, wireType: number, message: string, f: FieldSpec): unknown {
  switch (f.type) {
    case 's':
      expectWire(wireType, WireType.LengthDelimited, message, f);
      return r.bytes().toString('utf8');
    case 'y':
      expectWire(wireType, WireType.LengthDelimited, message, f);
      return r.bytes().toString('base64');
    case 'b':
      expectWire(wireType, WireType.Varint, message, f);
      return r.varint() !== 0n;
    case 'i32':
      expectWire(wireType, WireType.Varint, message, f);
      return Number(BigInt.asIntN(32, r.varint()));
    case 'i64':
      expectWire(wireType, WireType.Varint, message, f);
      return Number(BigInt.asIntN(64, r.varint()));
    case 'f64':
      expectWire(wireType, WireType.Fixed64, message, f);
      return r.fixed64().readDoubleLE(0);
    case 't':
    case 'mt':
      expectWire(wireType, WireType.LengthDelimited, message, f);
      return timeJson(r.bytes(), f.type === 'mt');
    case 'q':
      expectWire(wireType, WireType.LengthDelimited, message, f);
      return quantityJson(r.bytes());
    case 'ios':
      expectWire(wireType, WireType.LengthDelimited, message, f);
      return intOrStringJson(r.bytes());
    case 'fv1':
      expectWire(wireType, WireType.LengthDelimited, message, f);
      return fieldsV1Json(r.bytes());
    default:
      expectWire(wireType, WireType.LengthDelimited, message, f);
      return decodeMessage(r.bytes(), f.type);
  }
}

/**
 * metav1.Time / MicroTime: a Timestamp {seconds = 1, nanos = 2}. An empty
 * message is Go's zero time, which their MarshalJSON writes as null.
 */
function timeJson(buf: Buffer, micro: boolean): string | null {
  if (buf.length === 0) return null;
  let seconds = 0n;
  let nanos = 0;
  const r = new Reader(buf);
  while (!r.done) {
    const { num, wireType } = r.key();
    if (num === 1 && wireType === WireType.Varint) seconds = BigInt.asIntN(64, r.varint());
    else if (num === 2 && wireType === WireType.Varint) nanos = Number(BigInt.asIntN(32, r.varint()));
    else r.skip(wireType);
  }
  const date = new Date(Number(seconds) * 1000);
  if (Number.isNaN(date.getTime())) throw new ProtobufError(`time ${seconds}s is out of range`);
  const base = date.toISOString().slice(0, 19);
  // Time marshals with RFC3339 (whole seconds), MicroTime with six fractional digits.
  return micro ? `${base}.${String(Math.floor(nanos / 1000)).padStart(6, '0')}Z` : `${base}Z`;
}

/** resource.Quantity: {string = 1}, the quantity as written. */
function quantityJson(buf: Buffer): string {
  let text = '';
  const r = new Reader(buf);
  while (!r.done) {
    const { num, wireType } = r.key();
    if (num === 1 && wireType === WireType.LengthDelimited) text = r.bytes().toString('utf8');
    else r.skip(wireType);
  }
  return text || '0';
}

/** intstr.IntOrString: {type = 1 (0 Int, 1 String), intVal = 2, strVal = 3}. */
function intOrStringJson(buf: Buffer): number | string {
  let type = 0n;
  let intVal = 0;
  let strVal = '';
  const r = new Reader(buf);
  while (!r.done) {
    const { num, wireType } = r.key();
    if (num === 1 && wireType === WireType.Varint) type = r.varint();
    else if (num === 2 && wireType === WireType.Varint) intVal = Number(BigInt.asIntN(32, r.varint()));
    else if (num === 3 && wireType === WireType.LengthDelimited) strVal = r.bytes().toString('utf8');
    else r.skip(wireType);
  }
  return type === 1n ? strVal : intVal;
}

/** metav1.FieldsV1: {Raw = 1}, raw JSON that MarshalJSON writes as is. */
function fieldsV1Json(buf: Buffer): unknown {
  let raw = Buffer.alloc(0);
  const r = new Reader(buf);
  while (!r.done) {
    const { num, wireType } = r.key();
    if (num === 1 && wireType === WireType.LengthDelimited) raw = Buffer.from(r.bytes());
    else r.skip(wireType);
  }
  if (raw.length === 0) return null;
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch (e) {
    throw new ProtobufError(`FieldsV1: ${(e as Error).message}`);
  }
}

function expectWire(actual: number, expected: number, message: string, f: FieldSpec): void {
  if (actual !== expected) throw new ProtobufError(`proto: wrong wireType = ${actual} for field ${message}.${f.json}`);
}

function isPackable(type: string): boolean {
  return type === 'b' || type === 'i32' || type === 'i64' || type === 'f64';
}

function packableWire(type: string): number {
  return type === 'f64' ? WireType.Fixed64 : WireType.Varint;
}

function isZero(value: unknown): boolean {
  return value === '' || value === 0 || value === false;
}

/** What a map value decodes to when its entry has no value field. */
function zeroOf(type: string): unknown {
  switch (type) {
    case 's':
    case 'y':
      return '';
    case 'q':
      return '0';
    default:
      return SCALARS.has(type) ? null : {};
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
