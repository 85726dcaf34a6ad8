// A requested filename is stored whole or refused, never shortened: the
// limit is what every provider and file system holds with the runner's
// additions (MAX_FILENAME_BYTES, lib/src/storage/types.ts). Real parts:
// the gateway on Postgres, the MediaJob CRD on the local cluster (its CEL
// rule), and the runner's uploads onto local managed storage, where one
// name is one file-system entry (255 bytes).
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_FILENAME_BYTES } from '@mediajobs/lib/job-options';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { createManagedStorage } from '@mediajobs/lib/storage/index';
import { managedKeyPrefix } from '@mediajobs/lib/storage/types';
import { runnerDocuments } from '../operator/src/managed-storage.js';
import { resolveDestination, uploadJobFile } from '../runner-image/src/destination.js';
import { uploadSidecar } from '../runner-image/src/sidecars.js';
import { materialize, startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from '../api-gateway/test/support.js';

const SRC = 'https://media.example/watch?v=abc';
const TOO_LONG = `Invalid field 'filename': must be at most ${MAX_FILENAME_BYTES} bytes in UTF-8 (${MAX_FILENAME_BYTES} ASCII characters, `
  + 'fewer with accented or non-Latin letters) so that the stored name with its extension fits every file system';

// The longest names accepted: ASCII, and two-, three- and four-byte letters.
const LONGEST = {
  ascii: 'a'.repeat(MAX_FILENAME_BYTES),
  accented: 'é'.repeat(MAX_FILENAME_BYTES / 2),
  cjk: `${'語'.repeat(Math.floor(MAX_FILENAME_BYTES / 3))}${'x'.repeat(MAX_FILENAME_BYTES % 3)}`,
  // Letters too: a name of symbols alone says nothing, and the job id names the file then (objectKey).
  emoji: `${'🎬'.repeat(MAX_FILENAME_BYTES / 4 - 1)}take`,
};

describe('filename: stored whole, or refused with 400', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let gw: TestGateway;
  const dirs: string[] = [];
  const tmp = (label: string) => {
    const d = mkdtempSync(join(tmpdir(), `mj-${label}-`));
    dirs.push(d);
    return d;
  };

  before(async () => {
    tc = await startClusterWithCrd();
    gw = await startTestGateway();
  });
  after(async () => {
    await gw?.stop();
    await tc?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("POST /jobs refuses a 255-character name (the spec's limit in characters) that no file system could store with its extension", async () => {
    for (const filename of ['a'.repeat(255), 'é'.repeat(255), '語'.repeat(255), `${LONGEST.ascii}b`, `${LONGEST.accented}é`]) {
      const r = await gw.request('POST', '/jobs', { body: { url: SRC, filename } });
      expect([r.status, r.body], `${filename.length} characters`).to.deep.equal([400, { error: TOO_LONG }]);
    }
    expect((await gw.request('POST', '/jobs', { body: { url: SRC, filename: 'a'.repeat(256) } })).body)
      .to.deep.equal({ error: "Invalid field 'filename': must be at most 255 characters" });
  });

  it('the longest accepted names reach the MediaJob whole, through the CRD the apiserver checks', async () => {
    const ids: Record<string, string> = {};
    for (const [kind, filename] of Object.entries(LONGEST)) {
      const r = await gw.request('POST', '/jobs', { body: { url: SRC, filename } });
      expect(r.status, kind).to.equal(201);
      ids[kind] = (r.body as { job_id: string }).job_id;
    }
    for (const mj of (await materialize(gw.pool)).jobs) {
      await tc.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, body: mj });
    }
    for (const [kind, filename] of Object.entries(LONGEST)) {
      const mj = (await tc.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: ids[kind]! })) as MediaJob;
      expect(mj.spec.filename, kind).to.equal(filename);
    }
  });

  it('kubectl cannot make a MediaJob whose name is over the limit in bytes: the CRD says why', async () => {
    const body = { apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name: 'long-name' }, spec: { url: SRC, filename: 'é'.repeat(100) } };
    const err = await tc.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body })
      .then(() => undefined, (e: { code?: number; body?: string }) => e);
    expect(err?.code).to.equal(422);
    expect(JSON.parse(err!.body!).message).to.include(`spec.filename: Invalid value: "object": must be at most ${MAX_FILENAME_BYTES} bytes in UTF-8`);
  });

  it('on local managed storage each longest name is the file name whole, with every suffix the runner adds and a sidecar beside it', async () => {
    const dir = tmp('store');
    const settings = {
      MANAGED_STORAGE: 'local' as const, MANAGED_STORAGE_DIR: dir, PUBLIC_BASE_URL: 'http://127.0.0.1:1', FILE_URL_SECRET: 'file-url-secret-0123456789abcdef',
      MANAGED_S3_REGION: 'us-east-1', MANAGED_S3_FORCE_PATH_STYLE: true, JOB_ACTIVE_DEADLINE_SECONDS: 3600,
    };
    await createManagedStorage(settings);
    const apiKeyId = randomUUID();
    const prefix = `${managedKeyPrefix(apiKeyId)}/videos/`;
    const media = join(tmp('media'), 'talk.mp4');
    writeFileSync(media, 'the talk');
    const subtitle = join(tmp('side'), 'talk.vtt');
    writeFileSync(subtitle, 'WEBVTT\n');
    const lang = 'zh-Hant-TW-x-private'; // 20 characters, the longest tag a sidecar's key carries

    for (const [kind, filename] of Object.entries(LONGEST)) {
      const jobId = randomUUID();
      const id8 = jobId.slice(0, 8);
      const creds = tmp('creds');
      writeFileSync(join(creds, 'destination.json'), JSON.stringify(runnerDocuments(settings)(jobId, apiKeyId)));
      const dest = await resolveDestination(creds, {}, {});
      // Three attempts of one job: the plain key, then `-<id8>`, then `-<id8>-<time>` (a retried pod).
      const keys: string[] = [];
      for (let i = 0; i < 3; i++) {
        const up = await uploadJobFile(dest, { file: media, ext: 'mp4', contentType: 'video/mp4', jobId, filename });
        if (!up.ok) throw up.error;
        keys.push(up.result.key);
      }
      expect(keys.slice(0, 2), kind).to.deep.equal([`${prefix}${filename}.mp4`, `${prefix}${filename}-${id8}.mp4`]);
      expect(keys[2], kind).to.match(new RegExp(`^${prefix}${filename}-${id8}-[0-9a-z]{8}\\.mp4$`, 'u'));
      // A sidecar of the longest key, twice: the second is taken and gets `-<id8>` too.
      const side = [];
      for (let i = 0; i < 2; i++) side.push(await uploadSidecar(dest, keys[2]!, { path: subtitle, ext: 'vtt', lang }, jobId));
      const stem = keys[2]!.slice(0, -'.mp4'.length);
      expect(side, kind).to.deep.equal([`${stem}.${lang}.vtt`, `${stem}-${id8}.${lang}.vtt`]);
    }
    const names = readdirSync(join(dir, prefix));
    expect(names).to.have.length(Object.keys(LONGEST).length * 5);
    expect(Math.max(...names.map((n) => Buffer.byteLength(n)))).to.be.at.most(255);
  });
});
