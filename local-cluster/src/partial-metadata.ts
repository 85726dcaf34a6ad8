// Metadata-only answers: kube-apiserver's PartialObjectMetadata and
// PartialObjectMetadataList (apiserver/pkg/endpoints/handlers/response.go,
// asPartialObjectMetadata / asPartialObjectMetadataList). A client asks for
// them in its Accept header, e.g. client-go's metadata client and the
// metadata-only informers of controller-runtime:
//
//   Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json
//
// and gets each object's metadata alone, with no spec or status to decode.
// The apiserver's negotiation allows either kind on any endpoint and then
// refuses a mismatch (a list asked for as PartialObjectMetadata) with 406;
// so does this. The first media range that asks for a conversion decides,
// as negotiation picks the first acceptable range; one asking for a group
// or version the apiserver does not convert to is passed over.
import { StatusError } from './errors.js';
import type { KubeObject, ResourceType } from './types.js';

export type PartialKind = 'PartialObjectMetadata' | 'PartialObjectMetadataList';

export interface PartialRequest {
  kind: PartialKind;
  /** meta.k8s.io's version the answer is in. */
  version: 'v1' | 'v1beta1';
}

/** What the Accept header asks for: a metadata-only kind, or undefined for the object itself (or a Table, which table.ts serves). */
export function partialMetadataRequest(accept: string | undefined): PartialRequest | undefined {
  for (const range of (accept ?? '').split(',')) {
    const params = new Map<string, string>();
    for (const p of range.split(';').slice(1)) {
      const eq = p.indexOf('=');
      if (eq > 0) params.set(p.slice(0, eq).trim().toLowerCase(), p.slice(eq + 1).trim());
    }
    const as = params.get('as');
    if (as === undefined) {
      if (range.trim() !== '') return undefined;
      continue;
    }
    const version = params.get('v');
    const convertible = params.get('g') === 'meta.k8s.io' && (version === 'v1' || version === 'v1beta1');
    if (!convertible) continue;
    if (as === 'PartialObjectMetadata' || as === 'PartialObjectMetadataList') return { kind: as, version };
    return undefined;
  }
  return undefined;
}

/** The Go type kube-apiserver names in its refusal: the internal type of a built-in kind, Unstructured for a custom resource. */
function goType(rt: ResourceType, list: boolean): string {
  if (!rt.builtin) return list ? '*unstructured.UnstructuredList' : '*unstructured.Unstructured';
  const pkg = rt.group === '' ? 'core' : rt.group.split('.')[0];
  return `*${pkg}.${list ? rt.listKind : rt.kind}`;
}

function notAcceptable(message: string): StatusError {
  return new StatusError(406, 'NotAcceptable', message);
}

/** Where one object is answered (a get, a watch's events): only PartialObjectMetadata fits. Throws 406 for the list kind. */
export function checkOneObject(req: PartialRequest, rt: ResourceType): void {
  if (req.kind === 'PartialObjectMetadataList') {
    throw notAcceptable(`you requested PartialObjectMetadataList, but the requested object is not a list (${goType(rt, false)})`);
  }
}

/** One object's metadata as PartialObjectMetadata; 406 when a list was asked for. */
export function asPartialObjectMetadata(req: PartialRequest, rt: ResourceType, obj: KubeObject): Record<string, unknown> {
  checkOneObject(req, rt);
  return { kind: 'PartialObjectMetadata', apiVersion: `meta.k8s.io/${req.version}`, metadata: obj.metadata };
}

/** A list's items' metadata, with the list's own metadata (resourceVersion, continue); 406 when one object was asked for. */
export function asPartialObjectMetadataList(
  req: PartialRequest, rt: ResourceType, items: KubeObject[], listMeta: Record<string, unknown>,
): Record<string, unknown> {
  if (req.kind !== 'PartialObjectMetadataList') {
    throw notAcceptable(`you requested PartialObjectMetadata, but the requested object is a list (${goType(rt, true)})`);
  }
  const apiVersion = `meta.k8s.io/${req.version}`;
  return {
    kind: 'PartialObjectMetadataList', apiVersion, metadata: listMeta,
    items: items.map((o) => ({ kind: 'PartialObjectMetadata', apiVersion, metadata: o.metadata })),
  };
}
