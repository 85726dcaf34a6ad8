// The storage layer loads a provider's SDK only when a destination of that
// provider is built (lib/src/storage/index.ts): a runner uploading to Blob
// must not carry the S3, OSS, GCS and Drive clients (issue 5: the uploader's
// peak memory is budgeted under 150 MB, and the SDKs together are a third of
// it).
//
// How it is seen: a fresh node process (tsx, as the services run in tests)
// imports the storage entry point, then builds one provider of each kind in
// turn, and after each step lists the npm packages loaded so far. Two
// sources together see every load: a module resolve hook
// (module.register) reports each URL the ESM loader resolves, which covers
// ESM packages (@aws-sdk/client-s3, @azure/storage-blob), and
// require.cache, which every CommonJS module lands in (ali-oss and the CJS
// files an ESM package pulls in). Measuring RSS instead would be noisy, and
// a package list names the culprit when this fails.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tsxCommand } from '../../test/support/tsx.js';

const STORAGE_INDEX = pathToFileURL(fileURLToPath(new URL('../src/storage/index.ts', import.meta.url))).href;

/** The packages that are each provider's own client: what must load with it and only with it. */
const SDKS: Record<string, string[]> = {
  blob: ['@azure/storage-blob'],
  s3: ['@aws-sdk/client-s3', '@aws-sdk/s3-request-presigner'],
  oss: ['ali-oss'],
  gcs: ['@google-cloud/storage'],
  drive: ['@googleapis/drive'],
};

// Runs in the hooks thread: reports every resolved URL to the main thread.
const HOOKS = `
let port;
export function initialize(data) { port = data.port; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  port.postMessage(result.url);
  return result;
}
`;

const REGISTER = `
import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
const { port1, port2 } = new MessageChannel();
port1.unref();
globalThis.__resolvedPort = port1;
register(new URL('./hooks.mjs', import.meta.url), { data: { port: port2 }, transferList: [port2] });
`;

// The steps a process would take; prints {step: [packages loaded so far]} as JSON.
const PROBE = `
import { createRequire } from 'node:module';
import { generateKeyPairSync } from 'node:crypto';
import { receiveMessageOnPort } from 'node:worker_threads';

const seen = new Set();
const packages = () => {
  for (let m; (m = receiveMessageOnPort(globalThis.__resolvedPort)); ) seen.add(m.message);
  for (const file of Object.keys(createRequire(import.meta.url).cache)) seen.add(file);
  const names = new Set();
  for (const u of seen) {
    const m = /.*node_modules[\\\\/]((?:@[^\\\\/]+[\\\\/])?[^\\\\/]+)/.exec(decodeURIComponent(u));
    if (m) names.add(m[1].replace('\\\\', '/'));
  }
  return [...names].sort();
};

const out = {};
const storage = await import(${JSON.stringify(STORAGE_INDEX)});
out.import = packages();

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
const account = JSON.stringify({ type: 'service_account', client_email: 'probe@example.iam.gserviceaccount.com', private_key: privateKey });
const destinations = {
  managed: { provider: 'managed' },
  blob: { provider: 'blob', account_name: 'devstoreaccount1', account_key: 'a2V5', container: 'media', endpoint: 'http://127.0.0.1:9/devstoreaccount1' },
  s3: { provider: 's3', endpoint: 'http://127.0.0.1:9', bucket: 'media', region: 'us-east-1', access_key: 'AK', secret_key: 'SK' },
  oss: { provider: 'oss', endpoint: 'oss-cn-hangzhou.aliyuncs.com', bucket: 'media', access_key_id: 'AK', access_key_secret: 'SK' },
  gcs: { provider: 'gcs', project_id: 'p-1', bucket: 'media', service_account_json: account },
  drive: { provider: 'drive', service_account_json: account, folder_id: 'shared-drive' },
};
const env = { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: ${JSON.stringify(os.tmpdir())}, FILE_URL_SECRET: 'x'.repeat(32), PUBLIC_BASE_URL: 'http://127.0.0.1:9' };
for (const [step, destination] of Object.entries(destinations)) {
  const provider = await storage.createProvider(destination, { env });
  if (provider.name !== step) throw new Error('built ' + provider.name + ' for ' + step);
  out[step] = packages();
}
process.stdout.write(JSON.stringify(out) + '\\n');
`;

describe('storage: provider SDKs load on first use', () => {
  let dir: string;
  let loaded: Record<string, string[]>;

  before(async function () {
    this.timeout(120_000);
    dir = await mkdtemp(path.join(os.tmpdir(), 'mj-lazy-sdk-'));
    await writeFile(path.join(dir, 'hooks.mjs'), HOOKS);
    await writeFile(path.join(dir, 'register.mjs'), REGISTER);
    await writeFile(path.join(dir, 'probe.mjs'), PROBE);
    // Ours after tsx's, so the hook sees what tsx resolved too.
    const [node, ...args] = tsxCommand(path.join(dir, 'probe.mjs'));
    const script = args.pop() as string;
    const child = spawn(node as string, [...args, '--import', pathToFileURL(path.join(dir, 'register.mjs')).href, script], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_NO_WARNINGS: '1' },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, err).to.equal(0);
    loaded = JSON.parse(out.trim().split('\n').at(-1) as string) as Record<string, string[]>;
  });

  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Which providers' SDKs are among `packages`. */
  const sdksIn = (packages: string[]) => Object.keys(SDKS).filter((p) => SDKS[p]!.some((name) => packages.includes(name)));

  it('importing the storage entry point loads no provider SDK', () => {
    expect(sdksIn(loaded.import!)).to.deep.equal([]);
  });

  it('managed local storage loads none either', () => {
    expect(sdksIn(loaded.managed!)).to.deep.equal([]);
  });

  it("building a provider loads its own SDK and no other's", () => {
    // Built in this order in one process, so each step adds exactly one provider's client.
    const order = ['blob', 's3', 'oss', 'gcs', 'drive'];
    for (const [i, step] of order.entries()) {
      expect(sdksIn(loaded[step]!), `after building ${step}`).to.have.members(order.slice(0, i + 1));
      for (const name of SDKS[step]!) expect(loaded[step], `after building ${step}`).to.include(name);
    }
  });
});
