// KubeJobSubmitter against a scripted API server: the request it makes (the
// MediaJob it was given, as it was given), authentication kept, one
// keep-alive connection reused, AlreadyExists as success, other errors
// (another 409 included) and silence surfaced as failures.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import type { MediaJobOptions, MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { KubeJobSubmitter } from '../src/submitter.js';

const OPTIONS: MediaJobOptions = {
  url: 'https://m.example/v', format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};
const SPEC: MediaJobSpec = {
  jobId: '0190a0a0-0000-7000-8000-000000000001', owner: { apiKeyId: '0190a0a0-0000-7000-8000-0000000000aa' }, ...OPTIONS, destination: { type: 'managed' },
};

/** The MediaJob the gateway's route builds for a job named `name`. */
const job = (name: string, namespace = 'media') =>
  buildMediaJob({ jobId: name, apiKeyId: SPEC.owner.apiKeyId, namespace, options: OPTIONS, destination: SPEC.destination });

describe('api-gateway: KubeJobSubmitter', () => {
  let server: Server;
  let connections = 0;
  let reply: (req: IncomingMessage, body: string, res: ServerResponse) => void;
  const seen: { method?: string; url?: string; auth?: string; body: string }[] = [];
  let kc: k8s.KubeConfig;

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
        reply(req, body, res);
      });
    });
    server.on('connection', () => connections++);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'test-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => {
    seen.length = 0;
    connections = 0;
  });

  const status = (code: number, reason: string) => (_req: IncomingMessage, _body: string, res: ServerResponse) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: code < 300 ? 'Success' : 'Failure', reason, code }));
  };

  it('POSTs the MediaJob to its namespace with the kubeconfig credentials, over one kept-alive connection', async () => {
    reply = (_req, body, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(body);
    };
    const sub = new KubeJobSubmitter(kc, { namespace: 'media' });
    for (let i = 0; i < 5; i++) await sub.submit(job(`job-${i}`));
    expect(seen).to.have.length(5);
    expect(seen[0]).to.include({ method: 'POST', url: '/apis/mediajobs.io/v1alpha1/namespaces/media/mediajobs', auth: 'Bearer test-token' });
    expect(JSON.parse(seen[0]!.body)).to.deep.equal({
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
      metadata: {
        name: 'job-0', namespace: 'media', labels: { 'mediajobs.io/api-key-id': SPEC.owner.apiKeyId }, finalizers: ['mediajobs.io/cancel-on-delete'],
      },
      spec: { ...SPEC, jobId: 'job-0' },
    });
    expect(connections).to.equal(1);
  });

  it('creates exactly the MediaJob it is given: a batch episode keeps its batch label, spec.batchId and saved destination', async () => {
    reply = (_req, body, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(body);
    };
    const episode = buildMediaJob({
      jobId: 'ep-1', apiKeyId: SPEC.owner.apiKeyId, namespace: 'media', options: { ...OPTIONS, filename: 'Episode 1' },
      destination: { type: 'saved', provider: 's3', secretName: 'mj-dest-key-x-s3' }, batchId: '0190a0a0-0000-7000-8000-0000000000bb',
    });
    await new KubeJobSubmitter(kc, { namespace: 'media' }).submit(episode);
    expect(JSON.parse(seen[0]!.body)).to.deep.equal(episode);
  });

  it('refuses a MediaJob for another namespace without calling the API (the job row names the gateway\'s)', async () => {
    let err: Error | undefined;
    await new KubeJobSubmitter(kc, { namespace: 'media' }).submit(job('elsewhere', 'other')).catch((e: Error) => (err = e));
    expect(err?.message).to.equal('MediaJob elsewhere is for namespace other, not media');
    expect(seen).to.have.length(0);
  });

  it('treats 409 AlreadyExists as created', async () => {
    reply = status(409, 'AlreadyExists');
    await new KubeJobSubmitter(kc, { namespace: 'media' }).submit(job('dup'));
  });

  it('fails on a 409 that is not AlreadyExists (a Conflict is not "created")', async () => {
    reply = status(409, 'Conflict');
    let err: unknown;
    await new KubeJobSubmitter(kc, { namespace: 'media' }).submit(job('conflict')).catch((e: unknown) => (err = e));
    expect(err).to.be.instanceOf(k8s.ApiException);
    expect((err as k8s.ApiException<unknown>).code).to.equal(409);
  });

  it('fails on other API errors', async () => {
    reply = status(422, 'Invalid');
    let err: unknown;
    await new KubeJobSubmitter(kc, { namespace: 'media' }).submit(job('bad')).catch((e: unknown) => (err = e));
    expect(err).to.be.instanceOf(k8s.ApiException);
    expect((err as k8s.ApiException<unknown>).code).to.equal(422);
  });

  it('gives up on an API server that does not answer', async () => {
    reply = () => undefined;
    const t0 = Date.now();
    let err: Error | undefined;
    await new KubeJobSubmitter(kc, { namespace: 'media', timeoutMs: 200 }).submit(job('slow')).catch((e: Error) => (err = e));
    expect(err?.message).to.include('timed out');
    expect(Date.now() - t0).to.be.within(150, 2000);
  });
});
