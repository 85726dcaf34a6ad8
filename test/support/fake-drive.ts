// A local fake of the Google Drive API v3 and of Google's OAuth 2.0 token
// endpoint, for tests of the `drive` storage provider through the official
// client (@googleapis/drive with google-auth-library), unchanged: the
// provider is given `rootUrl` = this server and `tokenUri` = its /token.
//
// OAuth (service accounts, RFC 7523): POST /token with
// grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer and a JWT
// assertion. The assertion's RS256 signature is verified with the public key
// registered for its `iss`, and `aud` (Google's token URL, which the client
// signs whatever address it posts to), `iat`/`exp` (at most one hour) and
// `scope` are checked; failures answer 400 `invalid_grant` as Google does.
// Drive calls need `Authorization: Bearer <token>` (401 authError otherwise)
// with the drive scope (403 insufficientPermissions otherwise).
//
// Drive: files.get (metadata, and alt=media with one byte range), files.list
// (the `q` subset the provider uses: `'<id>' in parents`, `name = '…'`,
// `mimeType =|!= '…'`, `trashed = false|true`, joined by `and`; corpora
// user/drive/allDrives), files.create (metadata only), files.update (name,
// trashed), files.delete, and resumable uploads (uploadType=resumable:
// session in `Location`, chunks with Content-Range, 308 with `Range`, status
// queries `bytes */…`, non-final chunks in multiples of 256 KiB, DELETE to
// cancel). The permission rules that matter to a service account:
// - My Drive items are reached through sharing (a role on the item or an
//   ancestor); shared drive items through drive membership (organizer,
//   fileOrganizer = content manager, writer = contributor, commenter,
//   reader). Without access, Drive answers 404 notFound, not 403.
// - Shared drive items are invisible unless the request says
//   supportsAllDrives=true (and, for lists, includeItemsFromAllDrives=true).
// - A service account has no storage quota: creating any item in a My Drive
//   (its own or a folder a person shared with it) fails with 403
//   storageQuotaExceeded, the error and message Drive returns.
// - Adding to a folder needs writer or above; trashing in a shared drive
//   needs fileOrganizer or above, deleting needs organizer; in a My Drive
//   only the owner trashes or deletes.
// Permissions are set up by the test (addFolder, addSharedDrive), not through
// the permissions API, which the provider does not use.
import { createHash, createPublicKey, randomBytes, verify, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type DriveRole = 'organizer' | 'fileOrganizer' | 'writer' | 'commenter' | 'reader';
type Role = DriveRole | 'owner';

const RANK: Record<Role, number> = { reader: 1, commenter: 2, writer: 3, fileOrganizer: 4, organizer: 5, owner: 5 };
const FOLDER_MIME = 'application/vnd.google-apps.folder';
const DRIVE_SCOPE = 'https://www.googleapis.com/auth/drive';
const GOOGLE_TOKEN_AUD = 'https://oauth2.googleapis.com/token';
const CHUNK_UNIT = 256 * 1024;
const QUOTA_MESSAGE =
  'Service Accounts do not have storage quota. Leverage shared drives (https://developers.google.com/workspace/drive/api/guides/about-shareddrives), or use OAuth delegation (http://support.google.com/a/answer/7281227) instead.';

export interface FakeDriveFile {
  id: string;
  name: string;
  mimeType: string;
  parents: string[];
  /** Set for items in a shared drive. */
  driveId?: string;
  /** Owner of a My Drive item. */
  owner?: string;
  createdTime: string;
  trashed: boolean;
  content: Buffer;
  /** The app's private key-value pairs on the file (files.create's appProperties), returned with it. */
  appProperties?: Record<string, string>;
  /** Roles granted on this item (My Drive sharing). */
  shared: Map<string, Role>;
}

export interface FakeDriveEvent {
  method: string;
  /** e.g. `files.create`, `upload.chunk`, `token`. */
  op: string;
  status: number;
  /** The error reason, when there was one. */
  reason?: string;
}

export interface RunningFakeDrive {
  /** Drive API root for the provider's `rootUrl`, e.g. http://127.0.0.1:4321/ */
  rootUrl: string;
  /** The token endpoint for the provider's `tokenUri`. */
  tokenUri: string;
  events: FakeDriveEvent[];
  /** Register a service account's public key (PEM); its tokens are accepted from then on. */
  addServiceAccount(email: string, publicKeyPem: string): void;
  /** Delete the account's key: new tokens are refused and issued ones stop working. */
  revokeServiceAccount(email: string): void;
  /** A shared drive with these members; returns its id (also the id of its root folder). */
  addSharedDrive(name: string, members: Record<string, DriveRole>): string;
  /** A folder in `owner`'s My Drive (or inside `parent`), shared with the given roles; returns its id. */
  addFolder(opts: { name: string; owner?: string; parent?: string; sharedWith?: Record<string, DriveRole> }): string;
  file(id: string): FakeDriveFile | undefined;
  /** Items (not trashed) under `parent` by name. */
  childrenOf(parent: string): FakeDriveFile[];
  /** The item at `path` (names joined by `/`) under `parent`, newest when several share a name. */
  at(parent: string, path: string): FakeDriveFile | undefined;
  /** Resumable sessions neither finished nor cancelled. */
  openSessions(): number;
  /** Fail the next chunk PUT: keep only `keep` of its bytes, then answer `status`. */
  injectChunkFault(opts: { status: number; keep?: number }): void;
  stop(): Promise<void>;
}

interface Session {
  email: string;
  metadata: { name: string; parents: string[]; mimeType: string; appProperties?: Record<string, string> };
  declaredLength?: number;
  received: Buffer[];
  bytes: number;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    readonly extra: Record<string, string> = {},
  ) {
    super(message);
  }
}

function base64urlJson(part: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function newId(): string {
  // Drive ids: 33 URL-safe characters.
  return `1${randomBytes(24).toString('base64url')}`.slice(0, 33);
}

export async function startFakeDrive(): Promise<RunningFakeDrive> {
  const accounts = new Map<string, KeyObject>();
  const tokens = new Map<string, { email: string; scopes: string[]; expires: number }>();
  const drives = new Map<string, { name: string; members: Map<string, Role> }>();
  const files = new Map<string, FakeDriveFile>();
  const sessions = new Map<string, Session>();
  const events: FakeDriveEvent[] = [];
  const chunkFaults: Array<{ status: number; keep: number }> = [];
  let clock = Date.now();
  let rootUrl = '';

  /** Strictly increasing creation times, so "oldest" is well defined even within one millisecond. */
  function now(): string {
    clock = Math.max(clock + 1, Date.now());
    return new Date(clock).toISOString();
  }

  function myDriveRoot(email: string): FakeDriveFile {
    const id = `root-${createHash('sha256').update(email).digest('hex').slice(0, 20)}`;
    let root = files.get(id);
    if (!root) {
      root = { id, name: 'My Drive', mimeType: FOLDER_MIME, parents: [], owner: email, createdTime: now(), trashed: false, content: Buffer.alloc(0), shared: new Map() };
      files.set(id, root);
    }
    return root;
  }

  function roleOn(file: FakeDriveFile, email: string): Role | undefined {
    if (file.driveId) return drives.get(file.driveId)?.members.get(email);
    let best: Role | undefined;
    for (let f: FakeDriveFile | undefined = file, depth = 0; f && depth < 100; depth++) {
      const r: Role | undefined = f.owner === email ? 'owner' : f.shared.get(email);
      if (r && (!best || RANK[r] > RANK[best])) best = r;
      f = f.parents[0] ? files.get(f.parents[0]) : undefined;
    }
    return best;
  }

  function notFound(id: string): ApiError {
    return new ApiError(404, 'notFound', `File not found: ${id}.`, { location: 'fileId', locationType: 'parameter' });
  }

  /** The item as the caller may see it: 404 when it cannot. */
  function visible(id: string, email: string, q: URLSearchParams): { file: FakeDriveFile; role: Role } {
    const file = id === 'root' ? myDriveRoot(email) : files.get(id);
    if (!file) throw notFound(id);
    if (file.driveId && q.get('supportsAllDrives') !== 'true') throw notFound(id);
    const role = roleOn(file, email);
    if (!role) throw notFound(id);
    return { file, role };
  }

  function resource(file: FakeDriveFile, role: Role): Record<string, unknown> {
    const inShared = Boolean(file.driveId);
    return {
      kind: 'drive#file',
      id: file.id,
      name: file.name,
      mimeType: file.mimeType,
      parents: file.parents,
      ...(file.driveId ? { driveId: file.driveId } : {}),
      createdTime: file.createdTime,
      trashed: file.trashed,
      ...(file.mimeType !== FOLDER_MIME ? { size: String(file.content.length) } : {}),
      ...(file.appProperties ? { appProperties: file.appProperties } : {}),
      capabilities: {
        canAddChildren: file.mimeType === FOLDER_MIME && RANK[role] >= RANK.writer,
        canTrash: inShared ? RANK[role] >= RANK.fileOrganizer : role === 'owner',
        canDelete: inShared ? role === 'organizer' : role === 'owner',
        canDownload: true,
      },
    };
  }

  /** Checks for creating an item in `parentId`; returns the new item's location. */
  function creatable(parentId: string, email: string, q: URLSearchParams): { parent: FakeDriveFile; driveId?: string } {
    const { file: parent, role } = visible(parentId, email, q);
    if (parent.mimeType !== FOLDER_MIME) throw new ApiError(400, 'invalidParent', 'The specified parent is not a folder.');
    if (RANK[role] < RANK.writer) {
      throw new ApiError(403, 'insufficientFilePermissions', 'The user does not have sufficient permissions for this file.');
    }
    // Whatever a service account creates in a My Drive would be owned by it, and it has no quota.
    if (!parent.driveId) throw new ApiError(403, 'storageQuotaExceeded', QUOTA_MESSAGE);
    return { parent, ...(parent.driveId ? { driveId: parent.driveId } : {}) };
  }

  function addItem(item: Omit<FakeDriveFile, 'id' | 'createdTime' | 'trashed' | 'shared'> & { shared?: Map<string, Role> }): FakeDriveFile {
    const file: FakeDriveFile = { id: newId(), createdTime: now(), trashed: false, shared: new Map(), ...item };
    files.set(file.id, file);
    return file;
  }

  function authenticate(req: http.IncomingMessage): string {
    const m = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''));
    const t = m ? tokens.get(m[1] as string) : undefined;
    if (!t || t.expires < Date.now() || !accounts.has(t.email)) {
      throw new ApiError(401, 'authError', 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.', {
        location: 'Authorization',
        locationType: 'header',
      });
    }
    if (!t.scopes.includes(DRIVE_SCOPE)) {
      throw new ApiError(403, 'insufficientPermissions', 'Request had insufficient authentication scopes.');
    }
    return t.email;
  }

  /* ----------------------------- OAuth ----------------------------- */

  function grant(body: string): { status: number; json: Record<string, unknown>; reason?: string } {
    const refuse = (description: string) => ({ status: 400, json: { error: 'invalid_grant', error_description: description }, reason: 'invalid_grant' });
    const form = new URLSearchParams(body);
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') {
      return { status: 400, json: { error: 'unsupported_grant_type', error_description: 'Invalid grant_type: ' }, reason: 'unsupported_grant_type' };
    }
    const parts = (form.get('assertion') ?? '').split('.');
    if (parts.length !== 3) return refuse('Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.');
    const header = base64urlJson(parts[0] as string);
    const claims = base64urlJson(parts[1] as string);
    if (!header || !claims || header.alg !== 'RS256') return refuse('Invalid JWT Signature.');
    const email = typeof claims.iss === 'string' ? claims.iss : '';
    const key = accounts.get(email);
    if (!key) return refuse('Invalid grant: account not found');
    const signed = verify('RSA-SHA256', Buffer.from(`${parts[0]}.${parts[1]}`), key, Buffer.from(parts[2] as string, 'base64url'));
    if (!signed) return refuse('Invalid JWT Signature.');
    const nowS = Math.floor(Date.now() / 1000);
    const iat = Number(claims.iat);
    const exp = Number(claims.exp);
    if (claims.aud !== GOOGLE_TOKEN_AUD) return refuse('Invalid JWT: Failed audience check.');
    if (!Number.isFinite(iat) || !Number.isFinite(exp) || exp - iat > 3600 || exp <= nowS || iat > nowS + 300) {
      return refuse('Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.');
    }
    const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ').filter(Boolean) : [];
    if (scopes.length === 0) return { status: 400, json: { error: 'invalid_scope', error_description: 'Invalid OAuth scope or ID token audience provided.' }, reason: 'invalid_scope' };
    const token = `ya29.fake-${randomBytes(24).toString('base64url')}`;
    tokens.set(token, { email, scopes, expires: Date.now() + 3599_000 });
    return { status: 200, json: { access_token: token, expires_in: 3599, token_type: 'Bearer' } };
  }

  /* ----------------------------- files ----------------------------- */

  /** The subset of Drive's query language the provider writes. */
  function parseQuery(q: string): Array<(f: FakeDriveFile) => boolean> {
    const str = "'((?:[^'\\\\]|\\\\.)*)'";
    const unquote = (s: string) => s.replace(/\\(.)/g, '$1');
    const tests: Array<(f: FakeDriveFile) => boolean> = [];
    for (const clause of q.split(/\s+and\s+/)) {
      const c = clause.trim();
      let m: RegExpExecArray | null;
      if ((m = new RegExp(`^${str}\\s+in\\s+parents$`).exec(c))) {
        const id = unquote(m[1] as string);
        tests.push((f) => f.parents.includes(id));
      } else if ((m = new RegExp(`^name\\s*=\\s*${str}$`).exec(c))) {
        const name = unquote(m[1] as string);
        tests.push((f) => f.name === name);
      } else if ((m = new RegExp(`^mimeType\\s*(=|!=)\\s*${str}$`).exec(c))) {
        const [op, mime] = [m[1], unquote(m[2] as string)];
        tests.push((f) => (op === '=' ? f.mimeType === mime : f.mimeType !== mime));
      } else if ((m = /^trashed\s*=\s*(true|false)$/.exec(c))) {
        const want = m[1] === 'true';
        tests.push((f) => f.trashed === want);
      } else {
        throw new ApiError(400, 'invalid', 'Invalid Value', { location: 'q', locationType: 'parameter' });
      }
    }
    return tests;
  }

  function list(email: string, q: URLSearchParams): Record<string, unknown> {
    const corpora = q.get('corpora') ?? 'user';
    const allDrives = q.get('supportsAllDrives') === 'true' && q.get('includeItemsFromAllDrives') === 'true';
    const driveId = q.get('driveId');
    if (corpora === 'drive' && (!driveId || !allDrives)) {
      throw new ApiError(403, 'teamDriveIdRequiresTeamDriveSupport', 'The driveId parameter requires supportsAllDrives and includeItemsFromAllDrives.');
    }
    const tests = parseQuery(q.get('q') ?? '');
    const found = [...files.values()].filter((f) => {
      if (f.id.startsWith('root-') || f.id === f.driveId) return false; // roots are not listed as children
      if (f.driveId) {
        if (!allDrives || corpora === 'user') return false;
        if (corpora === 'drive' && f.driveId !== driveId) return false;
      } else if (corpora === 'drive') {
        return false;
      }
      return roleOn(f, email) !== undefined && tests.every((t) => t(f));
    });
    found.sort((a, b) => a.createdTime.localeCompare(b.createdTime) || a.id.localeCompare(b.id));
    if (q.get('orderBy') === 'createdTime desc') found.reverse();
    return { kind: 'drive#fileList', incompleteSearch: false, files: found.map((f) => resource(f, roleOn(f, email) as Role)) };
  }

  async function readBody(req: http.IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json; charset=UTF-8', 'Content-Length': String(Buffer.byteLength(text)), ...headers });
    res.end(text);
  }

  function finishUpload(session: Session): FakeDriveFile {
    const content = Buffer.concat(session.received, session.bytes);
    const parentId = session.metadata.parents[0] as string;
    const parent = files.get(parentId);
    return addItem({
      name: session.metadata.name,
      mimeType: session.metadata.mimeType,
      parents: [parentId],
      ...(parent?.driveId ? { driveId: parent.driveId } : {}),
      ...(session.metadata.appProperties ? { appProperties: session.metadata.appProperties } : {}),
      content,
    });
  }

  async function serveUpload(req: http.IncomingMessage, res: http.ServerResponse, url: URL, email: string, event: FakeDriveEvent): Promise<void> {
    const q = url.searchParams;
    const uploadId = q.get('upload_id');
    if (req.method === 'POST' && !uploadId) {
      event.op = 'upload.start';
      if (q.get('uploadType') !== 'resumable') throw new ApiError(400, 'badRequest', 'This fake serves only resumable uploads.');
      const meta = JSON.parse((await readBody(req)).toString('utf8') || '{}') as {
        name?: string; parents?: string[]; mimeType?: string; appProperties?: Record<string, string>;
      };
      const parentId = meta.parents?.[0] ?? 'root';
      const { parent } = creatable(parentId, email, q);
      const id = randomBytes(16).toString('base64url');
      const declared = req.headers['x-upload-content-length'];
      sessions.set(id, {
        email,
        metadata: {
          name: meta.name ?? 'Untitled',
          parents: [parent.id],
          mimeType: meta.mimeType ?? String(req.headers['x-upload-content-type'] ?? 'application/octet-stream'),
          ...(meta.appProperties ? { appProperties: meta.appProperties } : {}),
        },
        ...(declared !== undefined ? { declaredLength: Number(declared) } : {}),
        received: [],
        bytes: 0,
      });
      res.writeHead(200, { Location: `${rootUrl}upload/drive/v3/files?uploadType=resumable&upload_id=${id}`, 'Content-Length': '0' }).end();
      return;
    }
    const session = uploadId ? sessions.get(uploadId) : undefined;
    if (!session || session.email !== email) throw new ApiError(404, 'notFound', 'Upload session not found.');
    if (req.method === 'DELETE') {
      event.op = 'upload.cancel';
      sessions.delete(uploadId as string);
      res.writeHead(499, { 'Content-Length': '0' }).end();
      return;
    }
    if (req.method !== 'PUT') throw new ApiError(405, 'methodNotAllowed', 'Method not allowed.');
    event.op = 'upload.chunk';
    const body = await readBody(req);
    const range = String(req.headers['content-range'] ?? '');
    const status = /^bytes \*\/(\d+|\*)$/.exec(range);
    const data = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(range);
    const progress = () => (session.bytes > 0 ? { Range: `bytes=0-${session.bytes - 1}` } : {});
    const complete = (total: number) => {
      if (session.bytes !== total) return false;
      if (session.declaredLength !== undefined && session.declaredLength !== total) {
        throw new ApiError(400, 'badContent', 'The upload length does not match the declared X-Upload-Content-Length.');
      }
      const file = finishUpload(session);
      sessions.delete(uploadId as string);
      json(res, 200, { kind: 'drive#file', id: file.id, name: file.name, mimeType: file.mimeType, size: String(file.content.length), createdTime: file.createdTime });
      return true;
    };
    if (status) {
      event.op = 'upload.status';
      if (body.length !== 0) throw new ApiError(400, 'badRequest', 'A status query carries no body.');
      if (status[1] !== '*' && complete(Number(status[1]))) return;
      res.writeHead(308, { ...progress(), 'Content-Length': '0' }).end();
      return;
    }
    if (!data) throw new ApiError(400, 'badRequest', 'Invalid Content-Range header.');
    const start = Number(data[1]);
    const end = Number(data[2]);
    const total = data[3] === '*' ? undefined : Number(data[3]);
    if (end - start + 1 !== body.length || start > session.bytes) {
      throw new ApiError(400, 'badRequest', 'The Content-Range does not match the bytes sent or the bytes received so far.');
    }
    const last = total !== undefined && end + 1 === total;
    if (!last && body.length % CHUNK_UNIT !== 0) {
      throw new ApiError(400, 'badRequest', 'Chunks other than the last must be a multiple of 256 KiB.');
    }
    // Bytes before what the session already holds were received before: only the rest counts.
    let fresh = body.subarray(session.bytes - start);
    const fault = chunkFaults.shift();
    // Of a chunk cut short, the service keeps whole 256 KiB units only.
    if (fault) fresh = fresh.subarray(0, Math.min(fault.keep - (fault.keep % CHUNK_UNIT), fresh.length));
    if (fresh.length > 0) {
      session.received.push(Buffer.from(fresh));
      session.bytes += fresh.length;
    }
    if (fault) {
      event.reason = 'injected';
      res.writeHead(fault.status, { 'Content-Length': '0' }).end();
      return;
    }
    if (total !== undefined && complete(total)) return;
    res.writeHead(308, { ...progress(), 'Content-Length': '0' }).end();
  }

  async function serveFiles(req: http.IncomingMessage, res: http.ServerResponse, url: URL, email: string, event: FakeDriveEvent): Promise<void> {
    const q = url.searchParams;
    const m = /^\/drive\/v3\/files(?:\/([^/]+))?$/.exec(url.pathname);
    if (!m) throw new ApiError(404, 'notFound', 'Not Found');
    const id = m[1] ? decodeURIComponent(m[1]) : undefined;
    if (!id && req.method === 'GET') {
      event.op = 'files.list';
      json(res, 200, list(email, q));
      return;
    }
    if (!id && req.method === 'POST') {
      event.op = 'files.create';
      const meta = JSON.parse((await readBody(req)).toString('utf8') || '{}') as { name?: string; parents?: string[]; mimeType?: string };
      const { parent, driveId } = creatable(meta.parents?.[0] ?? 'root', email, q);
      const file = addItem({
        name: meta.name ?? 'Untitled',
        mimeType: meta.mimeType ?? 'application/octet-stream',
        parents: [parent.id],
        ...(driveId ? { driveId } : {}),
        content: Buffer.alloc(0),
      });
      json(res, 200, resource(file, roleOn(file, email) as Role));
      return;
    }
    if (!id) throw new ApiError(405, 'methodNotAllowed', 'Method not allowed.');
    const { file, role } = visible(id, email, q);
    if (req.method === 'GET' && q.get('alt') === 'media') {
      event.op = 'files.get.media';
      if (file.mimeType === FOLDER_MIME) throw new ApiError(403, 'fileNotDownloadable', 'Only files with binary content can be downloaded.');
      let body = file.content;
      const headers: Record<string, string> = { 'Content-Type': file.mimeType };
      let status = 200;
      const range = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range ?? ''));
      if (range) {
        const start = Number(range[1]);
        const end = range[2] ? Math.min(Number(range[2]), body.length - 1) : body.length - 1;
        if (start >= body.length) {
          res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end();
          return;
        }
        body = body.subarray(start, end + 1);
        headers['Content-Range'] = `bytes ${start}-${end}/${file.content.length}`;
        status = 206;
      }
      headers['Content-Length'] = String(body.length);
      res.writeHead(status, headers).end(body);
      return;
    }
    if (req.method === 'GET') {
      event.op = 'files.get';
      json(res, 200, resource(file, role));
      return;
    }
    if (req.method === 'PATCH') {
      event.op = 'files.update';
      const patch = JSON.parse((await readBody(req)).toString('utf8') || '{}') as { name?: string; trashed?: boolean };
      if (patch.trashed !== undefined) {
        const may = file.driveId ? RANK[role] >= RANK.fileOrganizer : role === 'owner';
        if (!may) throw new ApiError(403, 'insufficientFilePermissions', 'The user does not have sufficient permissions for this file.');
        file.trashed = patch.trashed;
      }
      if (patch.name !== undefined) {
        if (RANK[role] < RANK.writer) throw new ApiError(403, 'insufficientFilePermissions', 'The user does not have sufficient permissions for this file.');
        file.name = patch.name;
      }
      json(res, 200, resource(file, role));
      return;
    }
    if (req.method === 'DELETE') {
      event.op = 'files.delete';
      const may = file.driveId ? role === 'organizer' : role === 'owner';
      if (!may) throw new ApiError(403, 'insufficientFilePermissions', 'The user does not have sufficient permissions for this file.');
      files.delete(file.id);
      res.writeHead(204).end();
      return;
    }
    throw new ApiError(405, 'methodNotAllowed', 'Method not allowed.');
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake-drive');
    const event: FakeDriveEvent = { method: req.method ?? '', op: url.pathname, status: 0 };
    (async () => {
      if (url.pathname === '/token' && req.method === 'POST') {
        event.op = 'token';
        const out = grant((await readBody(req)).toString('utf8'));
        if (out.reason) event.reason = out.reason;
        json(res, out.status, out.json);
        return;
      }
      const email = authenticate(req);
      if (url.pathname === '/upload/drive/v3/files') return serveUpload(req, res, url, email, event);
      return serveFiles(req, res, url, email, event);
    })()
      .catch((err: unknown) => {
        req.resume();
        const e = err instanceof ApiError ? err : new ApiError(500, 'internalError', 'Internal Error');
        event.reason = e.reason;
        const status = e.status === 401 ? 'UNAUTHENTICATED' : e.status === 403 ? 'PERMISSION_DENIED' : e.status === 404 ? 'NOT_FOUND' : undefined;
        json(res, e.status, {
          error: {
            code: e.status,
            message: e.message,
            errors: [{ message: e.message, domain: e.reason === 'storageQuotaExceeded' ? 'usageLimits' : 'global', reason: e.reason, ...e.extra }],
            ...(status ? { status } : {}),
          },
        });
      })
      .finally(() => {
        event.status = res.statusCode;
        events.push(event);
      });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  rootUrl = `http://127.0.0.1:${port}/`;
  let stopped = false;

  return {
    rootUrl,
    tokenUri: `${rootUrl}token`,
    events,
    addServiceAccount(email, publicKeyPem) {
      accounts.set(email, createPublicKey(publicKeyPem));
    },
    revokeServiceAccount(email) {
      accounts.delete(email);
    },
    addSharedDrive(name, members) {
      const id = `0A${randomBytes(12).toString('base64url')}`;
      drives.set(id, { name, members: new Map(Object.entries(members)) });
      // The drive's id is also its root folder's.
      files.set(id, { id, name, mimeType: FOLDER_MIME, parents: [], driveId: id, createdTime: now(), trashed: false, content: Buffer.alloc(0), shared: new Map() });
      return id;
    },
    addFolder({ name, owner = 'alice@example.test', parent, sharedWith = {} }) {
      const parentFile = parent ? files.get(parent) : myDriveRoot(owner);
      if (!parentFile) throw new Error(`no parent ${parent}`);
      return addItem({
        name,
        mimeType: FOLDER_MIME,
        parents: [parentFile.id],
        ...(parentFile.driveId ? { driveId: parentFile.driveId } : { owner }),
        content: Buffer.alloc(0),
        shared: new Map(Object.entries(sharedWith)),
      }).id;
    },
    file(id) {
      return files.get(id);
    },
    childrenOf(parent) {
      return [...files.values()].filter((f) => f.parents.includes(parent) && !f.trashed);
    },
    at(parent, path) {
      let current: FakeDriveFile | undefined = files.get(parent);
      for (const name of path.split('/')) {
        if (!current) return undefined;
        const id: string = current.id;
        current = [...files.values()].filter((f) => f.parents.includes(id) && f.name === name && !f.trashed).at(-1);
      }
      return current;
    },
    openSessions() {
      return sessions.size;
    },
    injectChunkFault({ status, keep = 0 }) {
      chunkFaults.push({ status, keep });
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
