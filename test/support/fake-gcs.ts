// A local fake of Google Cloud Storage that the official client
// (@google-cloud/storage, google-auth-library) talks to unchanged through
// `apiEndpoint` and a token endpoint. There is no GCS emulator on the test
// machines, so this implements the parts of the service the gcs provider
// uses, following Google's published protocol rather than the client's code:
//
// - OAuth 2.0 token endpoint for service accounts (JWT bearer grant,
//   RFC 7523): the assertion's RS256 signature is verified with the public
//   key of a key pair the test generated, and its iss/aud/iat/exp/scope are
//   checked; failures answer `invalid_grant` as Google does.
// - JSON API with bearer tokens: 401 for a missing, unknown or expired token,
//   403 for an account without access to the bucket, 404 for a missing
//   bucket or object, errors in the JSON API's {"error": {code, message,
//   errors: [{domain, reason, message}]}} form.
// - Uploads: uploadType=media and multipart (multipart/related), and
//   resumable sessions: POST uploadType=resumable answers a session URI in
//   Location; PUTs carry Content-Range `bytes a-b/total|*` or `bytes */total|*`
//   (status query); a request that does not finish the object answers
//   308 Resume Incomplete with `Range: bytes=0-N` (no Range when nothing is
//   persisted), and, as the service does, persists only whole 256 KiB units
//   of a non-final request, so clients must resume from the reported offset.
//   The finished object carries md5Hash and crc32c (Base64, big-endian
//   CRC32C), which the client checks against what it sent.
// - The ifGenerationMatch precondition on uploads and deletes: 0 means "only
//   if there is no live object", N "only if the live object's generation is
//   N". A failed one answers 412 with reason `conditionNotMet`, as GCS does.
//   A resumable session takes it from the request that opens it (the session
//   URI echoes it, as the service's Location does) and, like the service,
//   applies it only when the object is created: opening the session and its
//   intermediate chunks succeed whatever the key holds, and the final request
//   (or the status query that completes the object) gets the 412. The fake
//   then drops the session and its bytes, so nothing of the refused upload
//   survives.
// - XML API GET of V4 signed URLs (GOOG4-RSA-SHA256): the canonical request
//   and string-to-sign are rebuilt from the request as it arrived, as the
//   service does, and X-Goog-Signature is verified with the signer's public
//   key; the URL must not have expired.
//
// Deliberate difference: the canonical `host` header is compared without its
// port. The client signs `URL.hostname` (no port), which is right for
// storage.googleapis.com on 443 but not for a loopback server on an
// ephemeral port; everything else in the signature is checked as sent.
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const KiB = 1024;
const CHUNK_UNIT = 256 * KiB;
const GOOGLE_TOKEN_AUDIENCES = ['https://oauth2.googleapis.com/token', 'https://www.googleapis.com/oauth2/v4/token'];
const WRITE_SCOPES = [
  'https://www.googleapis.com/auth/devstorage.read_write',
  'https://www.googleapis.com/auth/devstorage.full_control',
  'https://www.googleapis.com/auth/cloud-platform',
];
const READ_SCOPES = [...WRITE_SCOPES, 'https://www.googleapis.com/auth/devstorage.read_only', 'https://www.googleapis.com/auth/cloud-platform.read-only'];

/* ------------------------------------------------------------------ */
/* CRC32C (Castagnoli), as GCS reports it: Base64 of the big-endian value */
/* ------------------------------------------------------------------ */

const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** Continue a CRC32C over `buf`; start with 0. */
export function crc32c(buf: Buffer, crc = 0): number {
  let c = ~crc >>> 0;
  for (let i = 0; i < buf.length; i++) c = (CRC32C_TABLE[(c ^ (buf[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}

function crc32cBase64(value: number): string {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value >>> 0);
  return b.toString('base64');
}

/* ------------------------------------------------------------------ */
/* Public shape                                                         */
/* ------------------------------------------------------------------ */

export interface FakeServiceAccount {
  email: string;
  keyId: string;
  projectId: string;
  /** PEM (PKCS#8) private key, as in a downloaded key file. */
  privateKey: string;
  /** The key file's JSON text; `token_uri` points at this fake (the provider ignores it; see gcs.ts). */
  json(): string;
  /** Delete the key: its JWTs and signed URLs fail from now on, as do tokens already issued for it. */
  revoke(): void;
}

export interface StoredObject {
  data: Buffer;
  contentType: string;
  generation: string;
}

/** One request the fake served. */
export interface FakeGcsRequest {
  kind:
    | 'token'
    | 'upload.media'
    | 'upload.multipart'
    | 'upload.resumable.start'
    | 'upload.resumable.chunk'
    | 'upload.resumable.query'
    | 'upload.resumable.cancel'
    | 'object.get'
    | 'object.delete'
    | 'bucket.get'
    | 'signed.get'
    | 'other';
  method: string;
  status: number;
  bucket?: string;
  object?: string;
  /** Body bytes of upload requests. */
  bytes?: number;
  /** Content-Range of resumable PUTs. */
  range?: string;
  /** The ifGenerationMatch precondition the request carried; for a session's data requests, the session's. */
  ifGenerationMatch?: string;
  /** Service account the request acted as (token, API calls, signed URLs). */
  account?: string;
  /** OAuth scopes a token request asked for. */
  scopes?: string[];
}

export interface RunningFakeGcs {
  /** For the client's `apiEndpoint`, e.g. http://127.0.0.1:41234 */
  apiEndpoint: string;
  /** The fake's OAuth token endpoint. */
  tokenUri: string;
  port: number;
  /** A new key pair; the public half is registered here. `buckets` limits its access (default: every bucket). */
  createServiceAccount(opts?: { buckets?: string[]; email?: string }): FakeServiceAccount;
  createBucket(name: string): void;
  object(bucket: string, name: string): StoredObject | undefined;
  /** Every request so far, oldest first. */
  requests: FakeGcsRequest[];
  /**
   * Fault injection: the resumable data PUT after the next `after` ones
   * (default 0: the next one) persists `persistBytes` of its body (rounded
   * down to 256 KiB units, as the service would) and then answers `status`,
   * as if the connection had broken mid-request.
   */
  failNextChunk(opts: { status: number; persistBytes?: number; after?: number }): void;
  /** Stop listening and drop open connections; safe to call twice. */
  stop(): Promise<void>;
}

interface Account {
  email: string;
  keyId: string;
  publicKey: KeyObject;
  buckets: Set<string> | undefined;
  revoked: boolean;
}

interface Token {
  account: Account;
  scopes: string[];
  expiresAt: number;
}

interface Session {
  id: string;
  bucket: string;
  name: string;
  contentType: string;
  chunks: Buffer[];
  bytes: number;
  crc: number;
  md5: ReturnType<typeof createHash>;
  done?: ObjectResource;
  /** From the request that opened the session; checked when the object is created. */
  ifGenerationMatch?: string;
  /** The object's custom metadata, from the session's resource. */
  metadata?: Record<string, string>;
}

interface ObjectResource {
  kind: 'storage#object';
  id: string;
  selfLink: string;
  mediaLink: string;
  name: string;
  bucket: string;
  generation: string;
  metageneration: string;
  contentType: string;
  storageClass: string;
  size: string;
  md5Hash: string;
  /** Custom metadata, as the upload's resource gave it (absent when none). */
  metadata?: Record<string, string>;
  crc32c: string;
  etag: string;
  timeCreated: string;
  updated: string;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    /** More fields of the `errors[0]` entry, e.g. the location of a failed precondition. */
    readonly detail: Record<string, string> = {},
  ) {
    super(message);
  }
}

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

function b64urlJson(part: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** RFC 3986 percent-encoding of everything but the unreserved characters (what V4 signing uses). */
function strictEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/** Query parameters in order, decoded without turning `+` into a space (signed URLs encode spaces as %20). */
function rawQuery(search: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const pair of search.replace(/^\?/, '').split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const k = safeDecode(eq < 0 ? pair : pair.slice(0, eq));
    const v = safeDecode(eq < 0 ? '' : pair.slice(eq + 1));
    if (k === undefined || v === undefined) throw new HttpError(400, 'invalid', 'Malformed query string.');
    out.push([k, v]);
  }
  return out;
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Parts of a multipart/related body (RFC 2387), each with its lower-cased headers. */
function multipartParts(body: Buffer, contentType: string): Array<{ headers: Record<string, string>; body: Buffer }> {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  if (!m) throw new HttpError(400, 'invalid', 'Missing multipart boundary.');
  const delimiter = Buffer.from(`--${(m[1] ?? m[2] ?? '').trim()}`);
  const parts: Array<{ headers: Record<string, string>; body: Buffer }> = [];
  let pos = body.indexOf(delimiter);
  while (pos >= 0) {
    let start = pos + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break; // closing delimiter
    if (body.subarray(start, start + 2).toString() === '\r\n') start += 2;
    const next = body.indexOf(delimiter, start);
    if (next < 0) throw new HttpError(400, 'invalid', 'Unterminated multipart body.');
    let end = next;
    if (body.subarray(end - 2, end).toString() === '\r\n') end -= 2;
    const part = body.subarray(start, end);
    const sep = part.indexOf('\r\n\r\n');
    if (sep < 0) throw new HttpError(400, 'invalid', 'Malformed multipart part.');
    const headers: Record<string, string> = {};
    for (const line of part.subarray(0, sep).toString('utf8').split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    parts.push({ headers, body: part.subarray(sep + 4) });
    pos = next;
  }
  return parts;
}

function xmlError(res: http.ServerResponse, status: number, code: string, message: string, details?: string): void {
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const body =
    `<?xml version='1.0' encoding='UTF-8'?><Error><Code>${code}</Code><Message>${esc(message)}</Message>` +
    (details ? `<Details>${esc(details)}</Details>` : '') +
    '</Error>';
  res.writeHead(status, { 'content-type': 'application/xml; charset=UTF-8' }).end(body);
}

function jsonError(res: http.ServerResponse, err: HttpError): void {
  const body = {
    error: {
      code: err.status,
      message: err.message,
      errors: [{ message: err.message, domain: 'global', reason: err.reason, ...err.detail }],
    },
  };
  const headers: Record<string, string> = { 'content-type': 'application/json; charset=UTF-8' };
  if (err.status === 401) headers['www-authenticate'] = 'Bearer realm="https://accounts.google.com/"';
  res.writeHead(err.status, headers).end(JSON.stringify(body));
}

/* ------------------------------------------------------------------ */
/* The server                                                           */
/* ------------------------------------------------------------------ */

export async function startFakeGcs(opts: { buckets?: string[] } = {}): Promise<RunningFakeGcs> {
  const buckets = new Map<string, Map<string, { data: Buffer; resource: ObjectResource }>>();
  const accounts = new Map<string, Account>();
  const tokens = new Map<string, Token>();
  const sessions = new Map<string, Session>();
  const requests: FakeGcsRequest[] = [];
  let fault: { status: number; persistBytes: number; after: number } | undefined;
  let generation = 1_700_000_000_000_000;
  let apiEndpoint = '';
  let tokenUri = '';

  for (const b of opts.buckets ?? []) buckets.set(b, new Map());

  function bucketOf(name: string): Map<string, { data: Buffer; resource: ObjectResource }> {
    const b = buckets.get(name);
    if (!b) throw new HttpError(404, 'notFound', 'The specified bucket does not exist.');
    return b;
  }

  function authenticate(req: http.IncomingMessage, write: boolean): Account {
    const header = req.headers.authorization;
    const m = header ? /^Bearer (\S+)$/.exec(header) : null;
    if (!m) throw new HttpError(401, 'required', 'Anonymous caller does not have storage access. Login Required.');
    const token = tokens.get(m[1] as string);
    if (!token || token.expiresAt <= Date.now() || token.account.revoked) {
      throw new HttpError(401, 'authError', 'Invalid Credentials');
    }
    const allowed = write ? WRITE_SCOPES : READ_SCOPES;
    if (!token.scopes.some((s) => allowed.includes(s))) {
      throw new HttpError(403, 'insufficientPermissions', 'Request had insufficient authentication scopes.');
    }
    return token.account;
  }

  function authorize(account: Account, bucket: string, permission: string): void {
    if (account.buckets && !account.buckets.has(bucket)) {
      throw new HttpError(403, 'forbidden', `${account.email} does not have ${permission} access to the Google Cloud Storage bucket.`);
    }
  }

  /** The request's ifGenerationMatch, if it has one: a generation is a non-negative int64. */
  function generationMatch(url: URL): string | undefined {
    const value = url.searchParams.get('ifGenerationMatch');
    if (value === null) return undefined;
    if (!/^\d{1,19}$/.test(value)) throw new HttpError(400, 'invalid', `Invalid value for ifGenerationMatch: ${value}`);
    return String(BigInt(value));
  }

  /** Fail with GCS's 412 unless the live object under `name` satisfies ifGenerationMatch=`match`. */
  function checkGeneration(bucket: string, name: string, match: string | undefined): void {
    if (match === undefined) return;
    const live = bucketOf(bucket).get(name);
    const holds = match === '0' ? live === undefined : live?.resource.generation === match;
    if (!holds) {
      throw new HttpError(412, 'conditionNotMet', 'At least one of the pre-conditions you specified did not hold.', {
        locationType: 'header',
        location: 'If-Match',
      });
    }
  }

  function store(bucket: string, name: string, data: Buffer, contentType: string, crc?: number, md5?: string, metadata?: Record<string, string>): ObjectResource {
    const objects = bucketOf(bucket);
    const gen = String(++generation);
    const now = new Date().toISOString();
    const md5Hash = md5 ?? createHash('md5').update(data).digest('base64');
    const resource: ObjectResource = {
      kind: 'storage#object',
      id: `${bucket}/${name}/${gen}`,
      selfLink: `${apiEndpoint}/storage/v1/b/${bucket}/o/${encodeURIComponent(name)}`,
      mediaLink: `${apiEndpoint}/download/storage/v1/b/${bucket}/o/${encodeURIComponent(name)}?generation=${gen}&alt=media`,
      name,
      bucket,
      generation: gen,
      metageneration: '1',
      contentType,
      storageClass: 'STANDARD',
      size: String(data.length),
      md5Hash,
      crc32c: crc32cBase64(crc ?? crc32c(data)),
      etag: createHash('sha1').update(gen).digest('base64').slice(0, 12),
      timeCreated: now,
      updated: now,
      ...(metadata && { metadata }),
    };
    objects.set(name, { data, resource });
    return resource;
  }

  /* ---------------- token endpoint ---------------- */

  function tokenError(res: http.ServerResponse, error: string, description: string): number {
    res.writeHead(400, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ error, error_description: description }));
    return 400;
  }

  async function handleToken(req: http.IncomingMessage, res: http.ServerResponse, log: FakeGcsRequest): Promise<number> {
    const form = new URLSearchParams((await readBody(req)).toString('utf8'));
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') {
      return tokenError(res, 'unsupported_grant_type', 'Invalid grant_type.');
    }
    const parts = (form.get('assertion') ?? '').split('.');
    if (parts.length !== 3) return tokenError(res, 'invalid_grant', 'Invalid JWT: malformed.');
    const [h, p, s] = parts as [string, string, string];
    const header = b64urlJson(h);
    const claims = b64urlJson(p);
    if (!header || !claims || header.alg !== 'RS256') return tokenError(res, 'invalid_grant', 'Invalid JWT: unsupported header.');
    const account = typeof claims.iss === 'string' ? accounts.get(claims.iss) : undefined;
    if (!account) return tokenError(res, 'invalid_grant', 'Invalid grant: account not found');
    log.account = account.email;
    if (header.kid !== undefined && header.kid !== account.keyId) return tokenError(res, 'invalid_grant', 'Invalid JWT Signature.');
    const signatureOk = verify('RSA-SHA256', Buffer.from(`${h}.${p}`), account.publicKey, Buffer.from(s, 'base64url'));
    if (!signatureOk || account.revoked) return tokenError(res, 'invalid_grant', 'Invalid JWT Signature.');
    if (typeof claims.aud !== 'string' || ![...GOOGLE_TOKEN_AUDIENCES, tokenUri].includes(claims.aud)) {
      return tokenError(res, 'invalid_grant', 'Invalid JWT: Failed audience check.');
    }
    const now = Math.floor(Date.now() / 1000);
    const iat = Number(claims.iat);
    const exp = Number(claims.exp);
    if (!Number.isFinite(iat) || !Number.isFinite(exp) || iat > now + 300 || exp <= now || exp - iat > 3600) {
      return tokenError(res, 'invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.');
    }
    const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ').filter(Boolean) : [];
    log.scopes = scopes;
    if (scopes.length === 0) return tokenError(res, 'invalid_scope', 'Invalid OAuth scope or ID token audience provided.');
    const accessToken = `ya29.fake-${randomBytes(24).toString('base64url')}`;
    tokens.set(accessToken, { account, scopes, expiresAt: Date.now() + 3599_000 });
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(
      JSON.stringify({ access_token: accessToken, expires_in: 3599, token_type: 'Bearer' }),
    );
    return 200;
  }

  /* ---------------- uploads ---------------- */

  function sessionUri(s: Session): string {
    const precondition = s.ifGenerationMatch === undefined ? '' : `&ifGenerationMatch=${s.ifGenerationMatch}`;
    return `${apiEndpoint}/upload/storage/v1/b/${s.bucket}/o?uploadType=resumable&name=${encodeURIComponent(s.name)}${precondition}&upload_id=${s.id}`;
  }

  function incomplete(res: http.ServerResponse, s: Session): number {
    const headers: Record<string, string> = { 'content-length': '0' };
    if (s.bytes > 0) headers.range = `bytes=0-${s.bytes - 1}`;
    res.writeHead(308, headers).end();
    return 308;
  }

  /** The session's precondition, checked as its object is about to be created; a refused session is dropped with its bytes. */
  function admit(s: Session): void {
    try {
      checkGeneration(s.bucket, s.name, s.ifGenerationMatch);
    } catch (err) {
      sessions.delete(s.id);
      s.chunks = [];
      throw err;
    }
  }

  function finish(s: Session): ObjectResource {
    s.done = store(s.bucket, s.name, Buffer.concat(s.chunks), s.contentType, s.crc, s.md5.digest('base64'), s.metadata);
    s.chunks = [];
    return s.done;
  }

  function append(s: Session, data: Buffer): void {
    s.chunks.push(data);
    s.bytes += data.length;
    s.crc = crc32c(data, s.crc);
    s.md5.update(data);
  }

  async function handleResumablePut(req: http.IncomingMessage, res: http.ServerResponse, s: Session, log: FakeGcsRequest): Promise<number> {
    const range = req.headers['content-range'] ?? '';
    log.range = range;
    if (s.ifGenerationMatch !== undefined) log.ifGenerationMatch = s.ifGenerationMatch;
    const body = await readBody(req);
    log.bytes = body.length;
    if (s.done) {
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(s.done));
      return 200;
    }
    const query = /^bytes \*\/(\d+|\*)$/.exec(range);
    if (query) {
      log.kind = 'upload.resumable.query';
      if (body.length !== 0) throw new HttpError(400, 'invalid', 'A status query carries no body.');
      if (query[1] !== '*' && Number(query[1]) === s.bytes) {
        admit(s);
        const resource = finish(s);
        res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(resource));
        return 200;
      }
      return incomplete(res, s);
    }
    const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(range);
    if (!m) throw new HttpError(400, 'invalid', 'Failed to parse Content-Range header.');
    const first = Number(m[1]);
    const last = Number(m[2]);
    const total = m[3] === '*' ? undefined : Number(m[3]);
    if (last < first || body.length !== last - first + 1) throw new HttpError(400, 'invalid', 'Content-Range does not match the request body.');
    if (first !== s.bytes) {
      throw new HttpError(
        400,
        'invalid',
        `Invalid request. According to the Content-Range header, the upload offset is ${first} byte(s), which does not match the persisted size of ${s.bytes} byte(s).`,
      );
    }
    if (total !== undefined && last + 1 > total) throw new HttpError(400, 'invalid', 'Content-Range exceeds the declared total.');

    if (fault && fault.after-- === 0) {
      const f = fault;
      fault = undefined;
      const keep = Math.floor(Math.min(f.persistBytes, body.length) / CHUNK_UNIT) * CHUNK_UNIT;
      if (keep > 0) append(s, body.subarray(0, keep));
      throw new HttpError(f.status, 'backendError', 'Backend Error');
    }
    if (total !== undefined && last + 1 === total) {
      admit(s);
      append(s, body);
      const resource = finish(s);
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(resource));
      return 200;
    }
    // Not the last request: only whole 256 KiB units are persisted.
    const keep = Math.floor(body.length / CHUNK_UNIT) * CHUNK_UNIT;
    if (keep > 0) append(s, body.subarray(0, keep));
    return incomplete(res, s);
  }

  async function handleUpload(req: http.IncomingMessage, res: http.ServerResponse, url: URL, bucket: string, log: FakeGcsRequest): Promise<number> {
    const uploadType = url.searchParams.get('uploadType');
    const uploadId = url.searchParams.get('upload_id');
    if (uploadId !== null) {
      const s = sessions.get(uploadId);
      if (!s || s.bucket !== bucket) throw new HttpError(404, 'notFound', 'No such upload session.');
      log.object = s.name;
      if (req.method === 'DELETE') {
        log.kind = 'upload.resumable.cancel';
        sessions.delete(uploadId);
        res.writeHead(499).end();
        return 499;
      }
      if (req.method !== 'PUT') throw new HttpError(405, 'invalid', 'Method not allowed on an upload session.');
      // The session URI is the authorisation for its requests (as on GCS); an Authorization header is not needed.
      log.kind = 'upload.resumable.chunk';
      return handleResumablePut(req, res, s, log);
    }
    if (req.method !== 'POST') throw new HttpError(405, 'invalid', 'Method not allowed.');
    const account = authenticate(req, true);
    log.account = account.email;
    bucketOf(bucket);
    authorize(account, bucket, 'storage.objects.create');
    const ifGenerationMatch = generationMatch(url);
    if (ifGenerationMatch !== undefined) log.ifGenerationMatch = ifGenerationMatch;
    const contentType = String(req.headers['content-type'] ?? '');
    const body = await readBody(req);
    log.bytes = body.length;

    if (uploadType === 'resumable') {
      log.kind = 'upload.resumable.start';
      const meta = body.length ? (JSON.parse(body.toString('utf8')) as { name?: string; contentType?: string; metadata?: Record<string, string> }) : {};
      const name = url.searchParams.get('name') ?? meta.name;
      if (!name) throw new HttpError(400, 'required', 'Required parameter: name');
      log.object = name;
      const s: Session = {
        id: randomBytes(16).toString('base64url'),
        bucket,
        name,
        contentType: String(req.headers['x-upload-content-type'] ?? meta.contentType ?? 'application/octet-stream'),
        chunks: [],
        bytes: 0,
        crc: 0,
        md5: createHash('md5'),
      };
      // Kept for the object's creation, not checked now (see the header comment).
      if (ifGenerationMatch !== undefined) s.ifGenerationMatch = ifGenerationMatch;
      if (meta.metadata) s.metadata = meta.metadata;
      sessions.set(s.id, s);
      res.writeHead(200, { location: sessionUri(s), 'content-length': '0' }).end();
      return 200;
    }
    let name = url.searchParams.get('name') ?? undefined;
    let data: Buffer;
    let objectType: string;
    let custom: Record<string, string> | undefined;
    if (uploadType === 'multipart') {
      log.kind = 'upload.multipart';
      const parts = multipartParts(body, contentType);
      if (parts.length !== 2) throw new HttpError(400, 'invalid', 'A multipart upload has exactly two parts.');
      const meta = JSON.parse((parts[0] as { body: Buffer }).body.toString('utf8')) as { name?: string; contentType?: string; metadata?: Record<string, string> };
      name ??= meta.name;
      custom = meta.metadata;
      data = (parts[1] as { body: Buffer }).body;
      objectType = meta.contentType ?? (parts[1] as { headers: Record<string, string> }).headers['content-type'] ?? 'application/octet-stream';
    } else if (uploadType === 'media') {
      log.kind = 'upload.media';
      data = body;
      objectType = contentType || 'application/octet-stream';
    } else {
      throw new HttpError(400, 'invalid', 'Invalid upload type.');
    }
    if (!name) throw new HttpError(400, 'required', 'Required parameter: name');
    log.object = name;
    checkGeneration(bucket, name, ifGenerationMatch);
    const resource = store(bucket, name, data, objectType, undefined, undefined, custom);
    res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(resource));
    return 200;
  }

  /* ---------------- JSON API objects ---------------- */

  function handleObject(req: http.IncomingMessage, res: http.ServerResponse, url: URL, bucket: string, name: string, log: FakeGcsRequest): number {
    log.object = name;
    const write = req.method === 'DELETE';
    const account = authenticate(req, write);
    log.account = account.email;
    const objects = bucketOf(bucket);
    authorize(account, bucket, write ? 'storage.objects.delete' : 'storage.objects.get');
    const obj = objects.get(name);
    if (!obj) throw new HttpError(404, 'notFound', `No such object: ${bucket}/${name}`);
    if (req.method === 'DELETE') {
      log.kind = 'object.delete';
      const ifGenerationMatch = generationMatch(url);
      if (ifGenerationMatch !== undefined) log.ifGenerationMatch = ifGenerationMatch;
      checkGeneration(bucket, name, ifGenerationMatch);
      objects.delete(name);
      res.writeHead(204).end();
      return 204;
    }
    if (req.method !== 'GET') throw new HttpError(405, 'invalid', 'Method not allowed.');
    log.kind = 'object.get';
    if (url.searchParams.get('alt') === 'media') {
      res.writeHead(200, { 'content-type': obj.resource.contentType, 'content-length': String(obj.data.length) }).end(obj.data);
    } else {
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(obj.resource));
    }
    return 200;
  }

  /* ---------------- XML API: V4 signed URLs ---------------- */

  function handleSigned(req: http.IncomingMessage, res: http.ServerResponse, rawPath: string, rawSearch: string, log: FakeGcsRequest): number {
    log.kind = 'signed.get';
    const segments = rawPath.split('/').slice(1).map(safeDecode);
    if (segments.some((s) => s === undefined) || segments.length < 2) {
      xmlError(res, 400, 'InvalidArgument', 'Invalid argument.');
      return 400;
    }
    const bucket = segments[0] as string;
    const name = (segments as string[]).slice(1).join('/');
    log.bucket = bucket;
    log.object = name;
    const params = rawQuery(rawSearch);
    const get = (k: string) => params.find(([name]) => name.toLowerCase() === k.toLowerCase())?.[1];
    const signature = get('X-Goog-Signature');
    if (!signature) {
      xmlError(res, 403, 'AccessDenied', 'Access denied.', 'Anonymous caller does not have storage.objects.get access to the Google Cloud Storage object.');
      return 403;
    }
    if (get('X-Goog-Algorithm') !== 'GOOG4-RSA-SHA256') {
      xmlError(res, 400, 'InvalidArgument', 'Invalid argument.', 'Unsupported X-Goog-Algorithm.');
      return 400;
    }
    const credential = (get('X-Goog-Credential') ?? '').split('/');
    const date = get('X-Goog-Date') ?? '';
    const expires = Number(get('X-Goog-Expires'));
    const signedHeaders = (get('X-Goog-SignedHeaders') ?? '').split(';');
    const dm = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
    if (credential.length !== 5 || !dm || credential[1] !== date.slice(0, 8) || credential[3] !== 'storage' || credential[4] !== 'goog4_request') {
      xmlError(res, 400, 'AuthorizationQueryParametersError', 'Error parsing the X-Goog-Credential parameter.');
      return 400;
    }
    if (!Number.isInteger(expires) || expires < 1 || expires > 604_800 || !signedHeaders.includes('host')) {
      xmlError(res, 400, 'AuthorizationQueryParametersError', 'Invalid X-Goog-Expires or X-Goog-SignedHeaders.');
      return 400;
    }
    const issued = Date.UTC(Number(dm[1]), Number(dm[2]) - 1, Number(dm[3]), Number(dm[4]), Number(dm[5]), Number(dm[6]));
    if (Date.now() + 60_000 < issued) {
      xmlError(res, 400, 'InvalidArgument', 'Invalid argument.', 'The request is not yet valid.');
      return 400;
    }
    if (Date.now() >= issued + expires * 1000) {
      xmlError(res, 400, 'ExpiredToken', 'Invalid argument.', `Request signature expired at: ${new Date(issued + expires * 1000).toISOString()}`);
      return 400;
    }
    const account = accounts.get(credential[0] as string);

    // The canonical request, rebuilt from what arrived (Google's "Canonical requests").
    const canonicalPath = rawPath.split('/').map((seg) => strictEncode(safeDecode(seg) ?? seg)).join('/');
    const canonicalQuery = params
      .filter(([k]) => k.toLowerCase() !== 'x-goog-signature')
      .map(([k, v]) => [strictEncode(k), strictEncode(v)] as const)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
      .map(([k, v]) => `${k}=${v}`)
      .join('&');
    const canonicalHeaders = signedHeaders
      .map((h) => {
        let value = req.headers[h];
        const joined = Array.isArray(value) ? value.join(',') : (value ?? '');
        // See the header comment: the client signs the host without its port.
        value = h === 'host' ? joined.replace(/:\d+$/, '') : joined;
        return `${h}:${value.trim().replace(/\s+/g, ' ')}\n`;
      })
      .join('');
    const canonicalRequest = [req.method, canonicalPath, canonicalQuery, canonicalHeaders, signedHeaders.join(';'), 'UNSIGNED-PAYLOAD'].join('\n');
    const scope = credential.slice(1).join('/');
    const stringToSign = ['GOOG4-RSA-SHA256', date, scope, createHash('sha256').update(canonicalRequest).digest('hex')].join('\n');
    const valid =
      account !== undefined &&
      !account.revoked &&
      /^[0-9a-f]+$/i.test(signature) &&
      verify('RSA-SHA256', Buffer.from(stringToSign), account.publicKey, Buffer.from(signature, 'hex'));
    if (!valid) {
      xmlError(
        res,
        403,
        'SignatureDoesNotMatch',
        'Access denied.',
        'The request signature we calculated does not match the signature you provided. Check your Google secret key and signing method.',
      );
      return 403;
    }
    log.account = account.email;
    const objects = buckets.get(bucket);
    if (!objects) {
      xmlError(res, 404, 'NoSuchBucket', 'The specified bucket does not exist.');
      return 404;
    }
    if (account.buckets && !account.buckets.has(bucket)) {
      xmlError(res, 403, 'AccessDenied', 'Access denied.', `${account.email} does not have storage.objects.get access to the Google Cloud Storage object.`);
      return 403;
    }
    const obj = objects.get(name);
    if (!obj) {
      xmlError(res, 404, 'NoSuchKey', 'The specified key does not exist.');
      return 404;
    }
    res.writeHead(200, { 'content-type': obj.resource.contentType, 'content-length': String(obj.data.length) });
    res.end(req.method === 'HEAD' ? undefined : obj.data);
    return 200;
  }

  /* ---------------- routing ---------------- */

  async function route(req: http.IncomingMessage, res: http.ServerResponse, log: FakeGcsRequest): Promise<number> {
    const raw = req.url ?? '/';
    const q = raw.indexOf('?');
    const rawPath = q < 0 ? raw : raw.slice(0, q);
    const rawSearch = q < 0 ? '' : raw.slice(q);
    const url = new URL(raw, 'http://fake');
    const segs = rawPath.split('/').slice(1);

    if (req.method === 'POST' && rawPath === '/token') {
      log.kind = 'token';
      return handleToken(req, res, log);
    }
    // /upload/storage/v1/b/<bucket>/o
    if (segs[0] === 'upload' && segs[1] === 'storage' && segs[2] === 'v1' && segs[3] === 'b' && segs[5] === 'o' && segs.length === 6) {
      const bucket = safeDecode(segs[4] as string) ?? '';
      log.bucket = bucket;
      return handleUpload(req, res, url, bucket, log);
    }
    // /storage/v1/b/<bucket>[/o/<object>]
    if (segs[0] === 'storage' && segs[1] === 'v1' && segs[2] === 'b' && segs.length >= 4) {
      const bucket = safeDecode(segs[3] as string) ?? '';
      log.bucket = bucket;
      if (segs.length === 4 && req.method === 'GET') {
        log.kind = 'bucket.get';
        const account = authenticate(req, false);
        log.account = account.email;
        bucketOf(bucket);
        authorize(account, bucket, 'storage.buckets.get');
        res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify({ kind: 'storage#bucket', id: bucket, name: bucket }));
        return 200;
      }
      if (segs.length === 6 && segs[4] === 'o') {
        const name = safeDecode(segs[5] as string);
        if (name === undefined) throw new HttpError(400, 'invalid', 'Malformed object name.');
        return handleObject(req, res, url, bucket, name, log);
      }
    }
    // XML API path style: /<bucket>/<object...>
    if ((req.method === 'GET' || req.method === 'HEAD') && segs.length >= 2 && segs[0] !== 'storage' && segs[0] !== 'upload') {
      return handleSigned(req, res, rawPath, rawSearch, log);
    }
    throw new HttpError(404, 'notFound', 'Not Found');
  }

  const server = http.createServer((req, res) => {
    const log: FakeGcsRequest = { kind: 'other', method: req.method ?? '', status: 0 };
    route(req, res, log)
      .then((status) => {
        log.status = status;
      })
      .catch((err: unknown) => {
        const e = err instanceof HttpError ? err : new HttpError(500, 'backendError', 'Backend Error');
        log.status = e.status;
        // Drain what the client is still sending, so it reads the error instead of a reset.
        req.resume();
        if (!res.headersSent) jsonError(res, e);
        else res.destroy();
      })
      .finally(() => requests.push(log));
  });
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  apiEndpoint = `http://127.0.0.1:${port}`;
  tokenUri = `${apiEndpoint}/token`;

  let stopped = false;
  return {
    apiEndpoint,
    tokenUri,
    port,
    requests,
    createServiceAccount(o = {}) {
      const { privateKey, publicKey } = generateKeyPairSync('rsa', {
        modulusLength: 2048,
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
        publicKeyEncoding: { type: 'spki', format: 'pem' },
      });
      const email = o.email ?? `sa-${randomBytes(4).toString('hex')}@mediajobs-test.iam.gserviceaccount.com`;
      const keyId = randomBytes(20).toString('hex');
      const account: Account = {
        email,
        keyId,
        publicKey: createPublicKey(publicKey),
        buckets: o.buckets ? new Set(o.buckets) : undefined,
        revoked: false,
      };
      accounts.set(email, account);
      return {
        email,
        keyId,
        projectId: 'mediajobs-test',
        privateKey,
        json: () =>
          JSON.stringify({
            type: 'service_account',
            project_id: 'mediajobs-test',
            private_key_id: keyId,
            private_key: privateKey,
            client_email: email,
            client_id: '100000000000000000000',
            auth_uri: 'https://accounts.google.com/o/oauth2/auth',
            token_uri: tokenUri,
            auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
            universe_domain: 'googleapis.com',
          }),
        revoke() {
          account.revoked = true;
        },
      };
    },
    createBucket(name) {
      if (!buckets.has(name)) buckets.set(name, new Map());
    },
    object(bucket, name) {
      const o = buckets.get(bucket)?.get(name);
      return o ? { data: o.data, contentType: o.resource.contentType, generation: o.resource.generation } : undefined;
    },
    failNextChunk(f) {
      fault = { status: f.status, persistBytes: f.persistBytes ?? 0, after: f.after ?? 0 };
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
