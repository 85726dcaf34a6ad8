// The operator's playlist expansions of kubectl-applied MediaBatches run
// yt-dlp through the egress proxy that applies the outbound policy at
// connect time (issue 35 item 3, as api-gateway/test/own-fetches.test.ts for
// the gateway). OUTBOUND_ALLOWED_CIDRS=127.0.0.1/32 allows the test's site on
// 127.0.0.1 and refuses 127.0.0.2, an "internal" service that counts every
// TCP connection it accepts and serves a real feed to whoever reaches it.
import { expect } from 'chai';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { API_VERSION, GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { buildFeed } from '../../lib/test/batches-support.js';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';

const CRDS = ['mediajob.yaml', 'mediabatch.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));
const PLAYLIST = 'https://www.youtube.com/playlist?list=PLoperatoregress0redirect';

interface CountingServer {
  port: number;
  /** TCP connections accepted (a refused destination must not even be connected to). */
  accepted: number;
  requests: string[];
  stop(): Promise<void>;
}

async function listen(host: string, handler: RequestListener): Promise<CountingServer> {
  const server: Server = createServer((req, res) => {
    counted.requests.push(req.url ?? '');
    handler(req, res);
  });
  const counted: CountingServer = { port: 0, accepted: 0, requests: [], stop: () => new Promise<void>((r) => server.close(() => r())) };
  server.on('connection', () => counted.accepted++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  counted.port = (server.address() as AddressInfo).port;
  server.keepAliveTimeout = 100;
  return counted;
}

describe('operator: a MediaBatch\'s playlist expansion passes the outbound policy at connect time (local cluster)', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let apiKeyId: string;
  let internal: CountingServer;
  let site: CountingServer;
  let operator: OperatorHandle | undefined;

  before(async () => {
    tc = await startTestCluster({});
    for (const crd of CRDS) await tc.kubectl(['apply', '-f', crd]);
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    internal = await listen('127.0.0.2', (_req, res) => {
      const feed = buildFeed({ title: 'Internal', items: [{ title: 'Secret', enclosure: { url: `http://127.0.0.2:${internal.port}/clip.mp4` }, guid: 'a' }] });
      res.writeHead(200, { 'content-type': 'application/rss+xml' }).end(feed);
    });
    site = await listen('127.0.0.1', (req, res) => {
      if (req.url === '/feed') return void res.writeHead(302, { location: `http://127.0.0.2:${internal.port}/feed.xml` }).end();
      res.writeHead(404).end();
    });
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  after(async () => {
    await operator?.stop();
    await Promise.all([internal?.stop(), site?.stop()]);
    await db?.drop();
    await tc?.stop();
  });

  it('a playlist whose document redirects to a refused address is not expanded: no connection to it, no MediaJob', async () => {
    operator = await startOperator(loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('t1'),
      RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32',
      MEDIA_INFO_URL_MAP: JSON.stringify({ [PLAYLIST]: `http://127.0.0.1:${site.port}/feed` }),
    }), { log: pino({ level: process.env.LOG_LEVEL ?? 'silent' }), storage: { presign: async (key) => `http://files.test/${key}`, destination: () => ({ provider: 'managed' }) } });
    await custom.createNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL,
      body: {
        apiVersion: API_VERSION, kind: 'MediaBatch', metadata: { name: 'egress-playlist', namespace: 'default' },
        spec: { showUrl: PLAYLIST, owner: { apiKeyId } } as MediaBatch['spec'],
      } satisfies MediaBatch,
    });
    // yt-dlp ran (it asked the allowed site, which redirected); give a follow of the redirect time to show.
    await eventually(async () => site.requests.includes('/feed'), 60_000);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(internal.accepted, 'connections the refused address accepted').to.equal(0);
    const jobs = await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL }) as { items: MediaJob[] };
    expect(jobs.items).to.have.length(0);
  });
});
