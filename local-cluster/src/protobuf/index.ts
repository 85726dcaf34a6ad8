// Request bodies in Kubernetes' protobuf encoding
// (application/vnd.kubernetes.protobuf).
//
// Why clients send it: client-go's generated clientsets (v1.32 is generated
// with client-gen --prefers-protobuf) call UseProtobufAsDefaultIfPreferred on
// every request, and rest.Request.UseProtobufAsDefault switches a request to
// Content-Type application/vnd.kubernetes.protobuf and Accept
// "application/vnd.kubernetes.protobuf,application/json" whenever the
// rest.Config sets no ContentType — which kubectl never does. So every typed
// client write of kubectl (create secret, configmap, namespace,
// serviceaccount, job ...) arrives as protobuf, and client-go does not retry
// in JSON after a 415 (its 415 fallback exists only for CBOR). Answers may
// stay JSON: the Accept list allows it, and client-go decodes by the
// response's Content-Type.
//
// The body is "k8s\0" followed by a runtime.Unknown {typeMeta {apiVersion =
// 1, kind = 2} = 1, raw = 2, contentEncoding = 3, contentType = 4}, raw
// being the object's message (messages.ts). It is decoded into the JSON the
// client would have sent, so everything after decoding is shared with JSON
// bodies.
//
// CustomResourceDefinition bodies are not decoded and get 415: no kubectl
// command writes CRDs through a typed client (apply and create -f use the
// dynamic client, JSON), and JSONSchemaProps' JSON-valued wrappers (JSON,
// JSONSchemaPropsOrBool/OrArray/OrStringArray) would need their own
// decoders. Custom resources get 415 as on a real server, which has no
// protobuf for them either.
import { StatusError, badRequest, unsupportedMediaType } from '../errors.js';
import type { KubeObject, ResourceType } from '../types.js';
import { decodeMessage } from './decode.js';
import { DECODED_KINDS } from './messages.js';
import { ProtobufError, Reader, WireType } from './wire.js';

export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]); // "k8s\0"

interface Envelope {
  apiVersion: string;
  kind: string;
  raw: Buffer;
}

/**
 * Decodes a protobuf create/update body into the object's JSON form. Errors
 * are the apiserver's 400s (transformDecodeError) and 415s.
 */
export function decodeProtobufObject(body: Buffer, rt: ResourceType): KubeObject {
  if (!rt.builtin || !DECODED_KINDS.includes(rt.kind)) {
    throw unsupportedMediaType(['application/json', 'application/yaml']);
  }
  const envelope = openEnvelope(body, rt.kind);
  // Go picks the type from the envelope's kind; a kind mismatch is then
  // rejected by the same check as for JSON bodies.
  const message = DECODED_KINDS.includes(envelope.kind) ? envelope.kind : rt.kind;
  let obj: Record<string, unknown>;
  try {
    obj = decodeMessage(envelope.raw, message);
  } catch (e) {
    if (!(e instanceof ProtobufError)) throw e;
    throw badRequest(`${envelope.kind} in version "${versionOf(envelope.apiVersion)}" cannot be handled as a ${rt.kind}: ${e.message}`);
  }
  // An envelope without apiVersion takes the endpoint's, as the serializer defaults it.
  const typeMeta = envelope.apiVersion ? { apiVersion: envelope.apiVersion, kind: envelope.kind } : { kind: envelope.kind };
  return { ...typeMeta, ...obj, metadata: obj.metadata ?? {} } as KubeObject;
}

/** Decodes a protobuf DeleteOptions body (typed clients' Delete) into its JSON form. */
export function decodeProtobufDeleteOptions(body: Buffer): Record<string, unknown> {
  return decodeProtobufKind(body, 'DeleteOptions');
}

/** Decodes a body of a kind served outside the resource registry (DeleteOptions, SelfSubjectAccessReview) into its JSON form. */
export function decodeProtobufKind(body: Buffer, kind: string): Record<string, unknown> {
  const envelope = openEnvelope(body, kind);
  try {
    return decodeMessage(envelope.raw, kind);
  } catch (e) {
    if (!(e instanceof ProtobufError)) throw e;
    throw badRequest(`${kind} in version "${versionOf(envelope.apiVersion)}" cannot be handled as a ${kind}: ${e.message}`);
  }
}

export function isProtobuf(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase() === PROTOBUF_MEDIA_TYPE;
}

function openEnvelope(body: Buffer, expectedKind: string): Envelope {
  const unrecognized = (why: string): StatusError =>
    badRequest(`the object provided is unrecognized (must be of type ${expectedKind}): ${why} (${summarize(body)})`);
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw unrecognized(`provided data does not appear to be a protobuf message, expected prefix [${[...MAGIC].join(' ')}]`);
  }
  const envelope: Envelope = { apiVersion: '', kind: '', raw: Buffer.alloc(0) };
  try {
    const r = new Reader(body.subarray(MAGIC.length));
    while (!r.done) {
      const { num, wireType } = r.key();
      if (num === 1 && wireType === WireType.LengthDelimited) {
        const typeMeta = decodeTypeMeta(r.bytes());
        envelope.apiVersion = typeMeta.apiVersion;
        envelope.kind = typeMeta.kind;
      } else if (num === 2 && wireType === WireType.LengthDelimited) {
        envelope.raw = Buffer.from(r.bytes());
      } else {
        // contentEncoding and contentType: always empty from Go clients.
        r.skip(wireType);
      }
    }
  } catch (e) {
    if (!(e instanceof ProtobufError)) throw e;
    throw unrecognized(e.message);
  }
  if (!envelope.kind) throw badRequest(`Object 'Kind' is missing in '${summarize(body)}'`);
  return envelope;
}

function decodeTypeMeta(buf: Buffer): { apiVersion: string; kind: string } {
  const out = { apiVersion: '', kind: '' };
  const r = new Reader(buf);
  while (!r.done) {
    const { num, wireType } = r.key();
    if (num === 1 && wireType === WireType.LengthDelimited) out.apiVersion = r.bytes().toString('utf8');
    else if (num === 2 && wireType === WireType.LengthDelimited) out.kind = r.bytes().toString('utf8');
    else r.skip(wireType);
  }
  return out;
}

function versionOf(apiVersion: string): string {
  return apiVersion.slice(apiVersion.indexOf('/') + 1);
}

/** apimachinery's summarizeData: the first 30 bytes, in hex for binary bodies. */
function summarize(body: Buffer): string {
  if (body.length === 0) return '<empty>';
  const head = body.subarray(0, 30);
  const text = body[0] === 0x7b ? head.toString('utf8') : head.toString('hex');
  return body.length > 30 ? `${text} ...` : text;
}
