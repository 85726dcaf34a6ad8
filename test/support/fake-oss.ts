// A local fake of the Alibaba Cloud OSS REST API, for tests of the `oss`
// storage provider through the official `ali-oss` client, unchanged.
//
// What it serves (the subset the provider uses, with OSS's status codes,
// headers and XML bodies): PutObject, GetObject (with one byte range),
// HeadObject, DeleteObject, InitiateMultipartUpload, UploadPart,
// CompleteMultipartUpload and AbortMultipartUpload.
//
// What it checks, as OSS does:
// - V4 signatures (OSS4-HMAC-SHA256), both in the Authorization header and in
//   signed URLs (x-oss-signature-version / x-oss-credential / x-oss-date /
//   x-oss-expires / x-oss-signature), recomputed from the request as
//   received: canonical URI `/<bucket>/<key>`, canonical query, the
//   content-type / content-md5 / x-oss-* headers plus AdditionalHeaders, and
//   the signing key derived from `aliyun_v4<secret>`, date, region, `oss`.
//   A wrong secret gives 403 SignatureDoesNotMatch, an unknown key id 403
//   InvalidAccessKeyId, an expired signed URL 403 AccessDenied.
// - V1 signatures (`Authorization: OSS <id>:<base64 hmac-sha1>` and the
//   OSSAccessKeyId / Expires / Signature query form) only when `allowV1` is
//   set: OSS closed V1 to new accounts and new buckets in 2025, which is why
//   the provider signs V4, and by default the fake refuses V1 the same way.
// - Per-key permissions (`read` keys get AccessDenied on writes; a key can be
//   limited to some buckets), missing buckets (NoSuchBucket), missing keys
//   (NoSuchKey), unknown upload ids (NoSuchUpload), parts smaller than
//   100 KiB other than the last (EntityTooSmall), ETags in Complete that do
//   not match the uploaded parts (InvalidPart).
// - `x-oss-forbid-overwrite: true` (case-insensitive value): a PutObject or
//   CompleteMultipartUpload that would replace an object fails with 409
//   FileAlreadyExists (EC 0026-00000002 and 0042-00000214). The check is
//   made where the object is created, so for a multipart upload it is the
//   Complete's header that counts and an object created after the Initiate
//   is kept too; InitiateMultipartUpload, which OSS documents as not
//   affecting an existing object, accepts the header and refuses nothing. A
//   refused Complete leaves the upload open, to be aborted. (OSS ignores the
//   header on versioned buckets; the fake has no versioning.)
//
// Addressing: OSS is virtual-hosted (`<bucket>.oss-<region>.aliyuncs.com`).
// The fake listens on 127.0.0.1, and ali-oss, given an IP endpoint, sends
// every request to that IP with `Host: <bucket>.oss-<region>.aliyuncs.com`,
// so the bucket comes from the Host header just as on OSS. A signed URL
// built for an IP endpoint carries no bucket at all (its host is the IP), so
// requests whose Host is the fake's own address (127.0.0.1 or localhost) are served from
// `boundBucket`, the way OSS serves a custom domain bound (CNAME) to one
// bucket. Error `Message` texts are OSS's where its documentation shows them;
// `EC` codes likewise, and are not relied on by the provider.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeOssKey {
  accessKeyId: string;
  accessKeySecret: string;
  /** `write` (default): everything; `read`: GetObject/HeadObject only. */
  access?: 'write' | 'read';
  /** Buckets the key may touch; absent means all. */
  buckets?: string[];
}

export interface FakeOssOptions {
  keys: FakeOssKey[];
  buckets: string[];
  /** Region the V4 signature scope must name; default `cn-hangzhou`. */
  region?: string;
  /** Bucket served to requests addressed to the fake's own host:port (see the header comment). */
  boundBucket?: string;
  /** Accept V1 signatures too (old buckets still do); default false. */
  allowV1?: boolean;
}

export interface FakeOssObject {
  body: Buffer;
  contentType: string;
  etag: string;
  /** User metadata (x-oss-meta-*, names lower-cased as OSS keeps them), answered with GetObject and HeadObject. */
  meta: Record<string, string>;
}

/** One request the fake answered: how tests see which OSS operations really happened. */
export interface FakeOssEvent {
  op: string;
  bucket: string;
  key: string;
  status: number;
  /** `v4`, `v4-query`, `v1`, `v1-query`, or `none`. */
  auth: string;
  /** Set when the request carried `x-oss-forbid-overwrite: true`. */
  forbidOverwrite?: true;
}

export interface RunningFakeOss {
  /** e.g. http://127.0.0.1:41234 — pass as the provider's endpoint. */
  endpoint: string;
  port: number;
  region: string;
  events: FakeOssEvent[];
  /** Stored objects per bucket, keyed by object key. */
  objects(bucket: string): Map<string, FakeOssObject>;
  /** Multipart uploads not yet completed or aborted. */
  pendingUploads(): number;
  /** Make the next request for `op` fail with this OSS error instead of being served. */
  injectFault(op: string, status: number, code: string): void;
  stop(): Promise<void>;
}

interface Upload {
  bucket: string;
  key: string;
  contentType: string;
  /** From the Initiate: OSS keeps an object's user metadata from there. */
  meta: Record<string, string>;
  parts: Map<number, { body: Buffer; etag: string }>;
}

class OssError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly ec: string,
    readonly extra: Record<string, string> = {},
  ) {
    super(message);
  }
}

const MIN_PART = 100 * 1024; // OSS: every part but the last is at least 100 KB
const MAX_V4_EXPIRES = 604_800; // V4 signed URLs live at most 7 days
const MAX_SKEW_MS = 15 * 60 * 1000;

/** RFC 3986 encoding, as OSS's V4 canonicalisation uses. */
function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function xmlEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function requestId(): string {
  return randomBytes(12).toString('hex').toUpperCase();
}

/** `x-oss-forbid-overwrite: true`: the write must not replace an existing object. */
function forbidsOverwrite(req: http.IncomingMessage): boolean {
  return String(req.headers['x-oss-forbid-overwrite'] ?? '').trim().toLowerCase() === 'true';
}

function md5Etag(body: Buffer): string {
  return `"${createHash('md5').update(body).digest('hex').toUpperCase()}"`;
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** `20250101T000000Z` → epoch ms, or NaN. */
function parseIsoBasic(s: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m) return NaN;
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
}

// Sub-resources that V1's CanonicalizedResource includes (OSS's documented list, trimmed to what a client of this fake can send).
const V1_SUBRESOURCES = new Set([
  'acl',
  'uploads',
  'uploadId',
  'partNumber',
  'location',
  'delete',
  'append',
  'position',
  'tagging',
  'symlink',
  'security-token',
  'x-oss-process',
  'response-content-type',
  'response-content-language',
  'response-expires',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
]);

export async function startFakeOss(opts: FakeOssOptions): Promise<RunningFakeOss> {
  const region = opts.region ?? 'cn-hangzhou';
  const buckets = new Map<string, Map<string, FakeOssObject>>(opts.buckets.map((b) => [b, new Map()]));
  const uploads = new Map<string, Upload>();
  const events: FakeOssEvent[] = [];
  const faults: Array<{ op: string; status: number; code: string }> = [];
  let ownHost = '';
  let ownPort = 0;

  function keyFor(id: string): FakeOssKey | undefined {
    return opts.keys.find((k) => k.accessKeyId === id);
  }

  /** Verify the request's signature; returns the key and how it was signed. */
  function authenticate(req: http.IncomingMessage, url: URL, bucket: string, key: string): { key: FakeOssKey; auth: string } {
    const authz = req.headers.authorization;
    const q = url.searchParams;
    if (authz?.startsWith('OSS4-HMAC-SHA256 ')) return verifyV4(req, url, bucket, key, authz);
    if (q.get('x-oss-signature-version') === 'OSS4-HMAC-SHA256') return verifyV4Query(req, url, bucket, key);
    if (authz?.startsWith('OSS ') || q.has('OSSAccessKeyId')) {
      if (!opts.allowV1) {
        throw new OssError(403, 'AccessDenied', 'The V1 signature is not supported for this bucket; use the V4 signature.', '0002-00000080');
      }
      return authz ? verifyV1(req, url, bucket, key, authz) : verifyV1Query(req, url, bucket, key);
    }
    throw new OssError(403, 'AccessDenied', 'You have no right to access this object because of bucket acl.', '0003-00000001');
  }

  function canonicalHeaders(req: http.IncomingMessage, additional: string[]): string {
    const names = new Set(additional);
    for (const name of Object.keys(req.headers)) {
      if (name === 'content-type' || name === 'content-md5' || name.startsWith('x-oss-')) names.add(name);
    }
    return [...names]
      .sort()
      .map((n) => {
        const v = req.headers[n];
        return `${n}:${(Array.isArray(v) ? v.join(',') : (v ?? '')).trim()}\n`;
      })
      .join('');
  }

  function canonicalQuery(url: URL, skip: string): string {
    const pairs: Array<[string, string]> = [];
    for (const [k, v] of url.searchParams) if (k !== skip) pairs.push([rfc3986(k), v === '' ? '' : rfc3986(v)]);
    pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    return pairs.map(([k, v]) => (v === '' ? k : `${k}=${v}`)).join('&');
  }

  function v4Signature(
    secret: string,
    method: string,
    bucket: string,
    key: string,
    query: string,
    headers: string,
    additional: string[],
    payload: string,
    datetime: string,
    scopeRegion: string,
  ): string {
    const uri = rfc3986(`/${bucket}/${key}`).replace(/%2F/g, '/');
    const canonicalRequest = [method, uri, query, headers, additional.join(';'), payload].join('\n');
    const date = datetime.slice(0, 8);
    const scope = `${date}/${scopeRegion}/oss/aliyun_v4_request`;
    const stringToSign = ['OSS4-HMAC-SHA256', datetime, scope, createHash('sha256').update(canonicalRequest).digest('hex')].join('\n');
    const signingKey = hmac(hmac(hmac(hmac(`aliyun_v4${secret}`, date), scopeRegion), 'oss'), 'aliyun_v4_request');
    return createHmac('sha256', signingKey).update(stringToSign).digest('hex');
  }

  /** Check `<id>/<date>/<region>/oss/aliyun_v4_request` and return the key. */
  function credentialKey(credential: string, datetime: string): { key: FakeOssKey; region: string } {
    const parts = credential.split('/');
    if (parts.length !== 5 || parts[3] !== 'oss' || parts[4] !== 'aliyun_v4_request') {
      throw new OssError(400, 'InvalidArgument', 'Invalid signing credential scope.', '0002-00000208');
    }
    const [id, date, scopeRegion] = parts as [string, string, string];
    const key = keyFor(id);
    if (!key) throw new OssError(403, 'InvalidAccessKeyId', 'The OSS Access Key Id you provided does not exist in our records.', '0002-00000902');
    if (date !== datetime.slice(0, 8)) throw new OssError(400, 'InvalidArgument', 'Invalid signing date in credential.', '0002-00000214');
    if (scopeRegion !== region) throw new OssError(400, 'InvalidArgument', 'Invalid signing region in credential.', '0002-00000215');
    return { key, region: scopeRegion };
  }

  function verifyV4(req: http.IncomingMessage, url: URL, bucket: string, objectKey: string, authz: string): { key: FakeOssKey; auth: string } {
    const fields = new Map<string, string>();
    for (const part of authz.slice('OSS4-HMAC-SHA256 '.length).split(',')) {
      const i = part.indexOf('=');
      if (i > 0) fields.set(part.slice(0, i).trim(), part.slice(i + 1).trim());
    }
    const credential = fields.get('Credential');
    const signature = fields.get('Signature');
    const datetime = String(req.headers['x-oss-date'] ?? '');
    if (!credential || !signature || !datetime) throw new OssError(403, 'AccessDenied', 'Authorization header is malformed.', '0002-00000201');
    const at = parseIsoBasic(datetime);
    if (Number.isNaN(at) || Math.abs(Date.now() - at) > MAX_SKEW_MS) {
      throw new OssError(403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.', '0002-00000504');
    }
    const { key, region: scopeRegion } = credentialKey(credential, datetime);
    const additional = fields.get('AdditionalHeaders')?.split(';').filter(Boolean) ?? [];
    const payload = String(req.headers['x-oss-content-sha256'] ?? '');
    if (payload !== 'UNSIGNED-PAYLOAD') throw new OssError(400, 'InvalidArgument', 'x-oss-content-sha256 must be UNSIGNED-PAYLOAD.', '0002-00000225');
    const expected = v4Signature(
      key.accessKeySecret,
      req.method ?? 'GET',
      bucket,
      objectKey,
      canonicalQuery(url, ''),
      canonicalHeaders(req, additional),
      additional,
      payload,
      datetime,
      scopeRegion,
    );
    if (!sameText(expected, signature)) {
      throw new OssError(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.', '0002-00000201');
    }
    return { key, auth: 'v4' };
  }

  function verifyV4Query(req: http.IncomingMessage, url: URL, bucket: string, objectKey: string): { key: FakeOssKey; auth: string } {
    const q = url.searchParams;
    const datetime = q.get('x-oss-date') ?? '';
    const expires = Number(q.get('x-oss-expires'));
    const signature = q.get('x-oss-signature') ?? '';
    const at = parseIsoBasic(datetime);
    if (Number.isNaN(at) || !Number.isInteger(expires) || expires <= 0 || expires > MAX_V4_EXPIRES) {
      throw new OssError(400, 'InvalidArgument', 'Invalid x-oss-date or x-oss-expires.', '0002-00000203');
    }
    if (Date.now() > at + expires * 1000) throw new OssError(403, 'AccessDenied', 'Request has expired.', '0002-00000212');
    const { key, region: scopeRegion } = credentialKey(q.get('x-oss-credential') ?? '', datetime);
    const additional = q.get('x-oss-additional-headers')?.split(';').filter(Boolean) ?? [];
    const expected = v4Signature(
      key.accessKeySecret,
      req.method ?? 'GET',
      bucket,
      objectKey,
      canonicalQuery(url, 'x-oss-signature'),
      canonicalHeaders(req, additional),
      additional,
      'UNSIGNED-PAYLOAD',
      datetime,
      scopeRegion,
    );
    if (!sameText(expected, signature)) {
      throw new OssError(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.', '0002-00000201');
    }
    return { key, auth: 'v4-query' };
  }

  function v1StringToSign(req: http.IncomingMessage, url: URL, bucket: string, objectKey: string, date: string): string {
    const ossHeaders = Object.keys(req.headers)
      .filter((n) => n.startsWith('x-oss-'))
      .sort()
      .map((n) => `${n}:${String(req.headers[n]).trim()}\n`)
      .join('');
    const sub = [...url.searchParams]
      .filter(([k]) => V1_SUBRESOURCES.has(k))
      .sort((a, b) => (a[0] < b[0] ? -1 : 1))
      .map(([k, v]) => (v === '' ? k : `${k}=${v}`));
    const resource = `/${bucket}/${objectKey}${sub.length ? `?${sub.join('&')}` : ''}`;
    const h = (n: string) => String(req.headers[n] ?? '');
    return `${req.method}\n${h('content-md5')}\n${h('content-type')}\n${date}\n${ossHeaders}${resource}`;
  }

  function v1Check(key: FakeOssKey | undefined, stringToSign: string, signature: string): FakeOssKey {
    if (!key) throw new OssError(403, 'InvalidAccessKeyId', 'The OSS Access Key Id you provided does not exist in our records.', '0002-00000902');
    const expected = createHmac('sha1', key.accessKeySecret).update(stringToSign).digest('base64');
    if (!sameText(expected, signature)) {
      throw new OssError(403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.', '0002-00000040');
    }
    return key;
  }

  function verifyV1(req: http.IncomingMessage, url: URL, bucket: string, objectKey: string, authz: string): { key: FakeOssKey; auth: string } {
    const m = /^OSS ([^:]+):(.+)$/.exec(authz);
    if (!m) throw new OssError(400, 'InvalidArgument', 'Authorization header is invalid.', '0002-00000022');
    const date = String(req.headers['x-oss-date'] ?? req.headers.date ?? '');
    return { key: v1Check(keyFor(m[1] as string), v1StringToSign(req, url, bucket, objectKey, date), m[2] as string), auth: 'v1' };
  }

  function verifyV1Query(req: http.IncomingMessage, url: URL, bucket: string, objectKey: string): { key: FakeOssKey; auth: string } {
    const q = url.searchParams;
    const expires = q.get('Expires') ?? '';
    if (!/^\d+$/.test(expires)) throw new OssError(403, 'AccessDenied', 'Invalid Expires.', '0002-00000074');
    if (Number(expires) * 1000 < Date.now()) throw new OssError(403, 'AccessDenied', 'Request has expired.', '0002-00000069');
    const key = keyFor(q.get('OSSAccessKeyId') ?? '');
    return { key: v1Check(key, v1StringToSign(req, url, bucket, objectKey, expires), q.get('Signature') ?? ''), auth: 'v1-query' };
  }

  function operation(method: string, q: URLSearchParams): string {
    if (method === 'PUT') return q.has('uploadId') ? 'UploadPart' : 'PutObject';
    if (method === 'POST' && q.has('uploads')) return 'InitiateMultipartUpload';
    if (method === 'POST' && q.has('uploadId')) return 'CompleteMultipartUpload';
    if (method === 'DELETE') return q.has('uploadId') ? 'AbortMultipartUpload' : 'DeleteObject';
    if (method === 'GET') return 'GetObject';
    if (method === 'HEAD') return 'HeadObject';
    return 'Unsupported';
  }

  /** A request's user metadata: its x-oss-meta-* headers, without the prefix. */
  function userMeta(req: http.IncomingMessage): Record<string, string> {
    return Object.fromEntries(Object.entries(req.headers)
      .filter(([n]) => n.startsWith('x-oss-meta-'))
      .map(([n, v]) => [n.slice('x-oss-meta-'.length), String(v)]));
  }

  async function readBody(req: http.IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  function upload(q: URLSearchParams, bucket: string, key: string): Upload {
    const u = uploads.get(q.get('uploadId') ?? '');
    if (!u || u.bucket !== bucket || u.key !== key) {
      throw new OssError(404, 'NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.', '0042-00000002');
    }
    return u;
  }

  async function serve(req: http.IncomingMessage, res: http.ServerResponse, event: FakeOssEvent): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake-oss');
    const host = String(req.headers.host ?? '');
    // Virtual-hosted: the first label of the Host is the bucket; the fake's own host is a bound custom domain.
    const bucket = host === ownHost || host === `localhost:${ownPort}` ? (opts.boundBucket ?? '') : (host.split('.')[0] ?? '');
    const key = decodeURIComponent(url.pathname.slice(1));
    const op = operation(req.method ?? '', url.searchParams);
    Object.assign(event, { op, bucket, key });
    const forbidOverwrite = forbidsOverwrite(req);
    if (forbidOverwrite) event.forbidOverwrite = true;

    const { key: cred, auth } = authenticate(req, url, bucket, key);
    event.auth = auth;
    const store = buckets.get(bucket);
    if (!store) throw new OssError(404, 'NoSuchBucket', 'The specified bucket does not exist.', '0015-00000101', { BucketName: bucket });
    const reading = op === 'GetObject' || op === 'HeadObject';
    if ((cred.buckets && !cred.buckets.includes(bucket)) || (!reading && cred.access === 'read')) {
      throw new OssError(403, 'AccessDenied', 'You have no right to access this object because of bucket acl.', '0003-00000001');
    }
    const fault = faults.findIndex((f) => f.op === op);
    if (fault >= 0) {
      const [f] = faults.splice(fault, 1);
      throw new OssError(f!.status, f!.code, 'Injected fault.', '0000-00000000');
    }
    if (op !== 'InitiateMultipartUpload' && op !== 'CompleteMultipartUpload' && key === '') {
      throw new OssError(400, 'InvalidObjectName', 'The specified object is not valid.', '0016-00000005');
    }

    switch (op) {
      case 'PutObject': {
        const body = await readBody(req);
        const md5 = req.headers['content-md5'];
        if (md5 && md5 !== createHash('md5').update(body).digest('base64')) {
          throw new OssError(400, 'InvalidDigest', 'The Content-MD5 you specified is not valid.', '0016-00000302');
        }
        if (forbidOverwrite && store.has(key)) {
          throw new OssError(409, 'FileAlreadyExists', 'The object you specified already exists and can not be overwritten.', '0026-00000002');
        }
        const etag = md5Etag(body);
        store.set(key, { body, contentType: String(req.headers['content-type'] ?? 'application/octet-stream'), etag, meta: userMeta(req) });
        res.writeHead(200, { ETag: etag, 'Content-Length': '0' }).end();
        return;
      }
      case 'InitiateMultipartUpload': {
        const id = randomBytes(16).toString('hex').toUpperCase();
        uploads.set(id, { bucket, key, contentType: String(req.headers['content-type'] ?? 'application/octet-stream'), meta: userMeta(req), parts: new Map() });
        xml(res, 200, `<InitiateMultipartUploadResult><Bucket>${xmlEscape(bucket)}</Bucket><Key>${xmlEscape(key)}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`);
        return;
      }
      case 'UploadPart': {
        const u = upload(url.searchParams, bucket, key);
        const n = Number(url.searchParams.get('partNumber'));
        if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new OssError(400, 'InvalidArgument', 'Part number must be an integer between 1 and 10000.', '0042-00000003');
        const body = await readBody(req);
        const etag = md5Etag(body);
        u.parts.set(n, { body, etag });
        res.writeHead(200, { ETag: etag, 'Content-Length': '0' }).end();
        return;
      }
      case 'CompleteMultipartUpload': {
        const u = upload(url.searchParams, bucket, key);
        const text = (await readBody(req)).toString('utf8');
        const listed = [...text.matchAll(/<Part>\s*<PartNumber>(\d+)<\/PartNumber>\s*<ETag>([^<]+)<\/ETag>\s*<\/Part>/g)].map((m) => ({
          n: Number(m[1]),
          etag: (m[2] as string).trim(),
        }));
        if (listed.length === 0) throw new OssError(400, 'MalformedXML', 'The XML you provided was not well-formed.', '0042-00000220');
        const bodies: Buffer[] = [];
        let last = 0;
        for (const [i, p] of listed.entries()) {
          const part = u.parts.get(p.n);
          if (p.n <= last) throw new OssError(400, 'InvalidPartOrder', 'The list of parts was not in ascending order.', '0042-00000206');
          if (!part || part.etag !== p.etag) {
            throw new OssError(400, 'InvalidPart', 'One or more of the specified parts could not be found or the specified entity tag might not have matched the part\'s entity tag.', '0042-00000205');
          }
          if (i < listed.length - 1 && part.body.length < MIN_PART) {
            throw new OssError(400, 'EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed size.', '0042-00000206');
          }
          bodies.push(part.body);
          last = p.n;
        }
        if (forbidOverwrite && store.has(key)) {
          throw new OssError(409, 'FileAlreadyExists', 'The object you specified already exists and can not be overwritten.', '0042-00000214');
        }
        const body = Buffer.concat(bodies);
        const etag = `"${createHash('md5').update(listed.map((p) => p.etag).join('')).digest('hex').toUpperCase()}-${listed.length}"`;
        store.set(key, { body, contentType: u.contentType, etag, meta: u.meta });
        uploads.delete(url.searchParams.get('uploadId') ?? '');
        xml(
          res,
          200,
          `<CompleteMultipartUploadResult><Location>${xmlEscape(`http://${host}/${key}`)}</Location><Bucket>${xmlEscape(bucket)}</Bucket><Key>${xmlEscape(key)}</Key><ETag>${etag}</ETag></CompleteMultipartUploadResult>`,
          { ETag: etag },
        );
        return;
      }
      case 'AbortMultipartUpload': {
        upload(url.searchParams, bucket, key);
        uploads.delete(url.searchParams.get('uploadId') ?? '');
        res.writeHead(204).end();
        return;
      }
      case 'DeleteObject': {
        store.delete(key); // OSS answers 204 whether or not the object existed
        res.writeHead(204).end();
        return;
      }
      case 'GetObject':
      case 'HeadObject': {
        const obj = store.get(key);
        if (!obj) throw new OssError(404, 'NoSuchKey', 'The specified key does not exist.', '0026-00000001', { Key: key });
        const headers: Record<string, string> = {
          'Content-Type': obj.contentType, ETag: obj.etag, 'Accept-Ranges': 'bytes',
          ...Object.fromEntries(Object.entries(obj.meta).map(([n, v]) => [`x-oss-meta-${n}`, v])),
        };
        let body = obj.body;
        let status = 200;
        const range = /^bytes=(\d*)-(\d*)$/.exec(String(req.headers.range ?? ''));
        if (range && (range[1] || range[2])) {
          const size = obj.body.length;
          const start = range[1] ? Number(range[1]) : Math.max(0, size - Number(range[2]));
          const end = range[1] && range[2] ? Math.min(Number(range[2]), size - 1) : size - 1;
          if (start < size && start <= end) {
            body = obj.body.subarray(start, end + 1);
            status = 206;
            headers['Content-Range'] = `bytes ${start}-${end}/${size}`;
          }
        }
        headers['Content-Length'] = String(body.length);
        res.writeHead(status, headers);
        res.end(op === 'HeadObject' ? undefined : body);
        return;
      }
      default:
        throw new OssError(405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.', '0016-00000001');
    }
  }

  function xml(res: http.ServerResponse, status: number, inner: string, headers: Record<string, string> = {}): void {
    const body = `<?xml version="1.0" encoding="UTF-8"?>\n${inner}`;
    res.writeHead(status, { 'Content-Type': 'application/xml', 'Content-Length': String(Buffer.byteLength(body)), ...headers });
    res.end(body);
  }

  const server = http.createServer((req, res) => {
    const id = requestId();
    res.setHeader('Server', 'AliyunOSS');
    res.setHeader('x-oss-request-id', id);
    const event: FakeOssEvent = { op: '', bucket: '', key: '', status: 0, auth: 'none' };
    serve(req, res, event)
      .catch((err: unknown) => {
        // Drain what the client still sends so it reads our answer rather than an EPIPE.
        req.resume();
        const e = err instanceof OssError ? err : new OssError(500, 'InternalError', 'We encountered an internal error. Please try again.', '0000-00000000');
        const extra = Object.entries(e.extra)
          .map(([k, v]) => `<${k}>${xmlEscape(v)}</${k}>`)
          .join('');
        const inner =
          `<Error><Code>${e.code}</Code><Message>${xmlEscape(e.message)}</Message><RequestId>${id}</RequestId>` +
          `<HostId>${xmlEscape(String(req.headers.host ?? ''))}</HostId>${extra}<EC>${e.ec}</EC>` +
          `<RecommendDoc>https://api.aliyun.com/troubleshoot?q=${e.ec}</RecommendDoc></Error>`;
        if (req.method === 'HEAD') {
          // HEAD answers carry no body; OSS puts the error, base64 XML, in x-oss-err.
          res.writeHead(e.status, { 'x-oss-err': Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>\n${inner}`).toString('base64') }).end();
        } else {
          xml(res, e.status, inner);
        }
      })
      .finally(() => {
        event.status = res.statusCode;
        events.push(event);
      });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  ownHost = `127.0.0.1:${port}`;
  ownPort = port;
  let stopped = false;
  return {
    endpoint: `http://${ownHost}`,
    port,
    region,
    events,
    objects(bucket: string) {
      return buckets.get(bucket) ?? new Map();
    },
    pendingUploads() {
      return uploads.size;
    },
    injectFault(op: string, status: number, code: string) {
      faults.push({ op, status, code });
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
