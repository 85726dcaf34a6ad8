// An API that tells every outcome (issue 38 item 6, docs/adr/0029), through
// every component: a job whose media is missing ends Warning and its
// webhook gets exactly one terminal event, job_warning, signed as the
// others; a webhook_events filter keeps every other event away; a running
// job shows its download in bytes; a failed job on corrupt media shows the
// tool's cause, cleaned, in GET /jobs/{id} and its job_failed.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { signature, secretKey } from '@mediajobs/lib/webhook-signing';
import { TERMINAL_EVENT_TYPES } from '@mediajobs/lib/webhook-event-types';
import { eventually } from '../../local-cluster/test/support.js';
import { MEDIA, generateMedia, startMediaServer, type MediaServer } from '../support/media.js';
import { startReceiver, startService, type Receiver, type Service } from './support.js';

/** An MP4 that is not one: an ftyp box and media data, no moov (ffmpeg: "moov atom not found"). */
function corruptMp4(): Buffer {
  const ftyp = Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from('ftypisom'), Buffer.from([0, 0, 2, 0]), Buffer.from('isomiso2')]);
  const mdat = Buffer.concat([Buffer.alloc(4), Buffer.from('mdat'), Buffer.alloc(100_000, 7)]);
  mdat.writeUInt32BE(mdat.length, 0);
  return Buffer.concat([ftyp, mdat]);
}

async function serveCorrupt(): Promise<{ baseUrl: string; stop(): Promise<void> }> {
  const body = corruptMp4();
  const server: Server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

describe('end to end: every outcome told (job_warning, webhook_events, bytes, error_detail)', function () {
  this.timeout(240_000);
  let svc: Service;
  let media: MediaServer;
  let receiver: Receiver;
  let corrupt: Awaited<ReturnType<typeof serveCorrupt>>;

  before(async () => {
    media = await startMediaServer();
    receiver = await startReceiver();
    corrupt = await serveCorrupt();
    svc = await startService();
  });

  after(async () => {
    await svc?.stop();
    await receiver?.stop();
    await corrupt?.stop();
    await media?.stop();
  });

  const submit = async (body: Record<string, unknown>) => {
    const created = await svc.api('POST', '/jobs', body);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return created.body.job_id as string;
  };
  const ended = (id: string) => eventually(async () => {
    const r = await svc.api('GET', `/jobs/${id}`);
    return ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled'].includes(r.body.status as string) ? r.body : undefined;
  }, 120_000, 250);
  const mine = (id: string) => receiver.hooks.filter((d) => d.body.job_id === id);
  /** The job's deliveries once its outbox has nothing left to send (GET /jobs/{id}/webhooks). */
  const allDelivered = async (id: string) => {
    await eventually(async () => {
      const log = await svc.api('GET', `/jobs/${id}/webhooks`);
      const events = log.body.events as { delivered_at: string | null }[];
      return events.length && events.every((e) => e.delivered_at) ? true : undefined;
    }, 30_000, 250);
    return mine(id);
  };

  it('a missing file ends Warning with exactly one terminal webhook, job_warning, signed as the others', async () => {
    const secret = await svc.api('POST', '/user/webhook-secret');
    expect(secret.status, JSON.stringify(secret.body)).to.be.oneOf([200, 201]);
    const key = secretKey(secret.body.secret as string);
    const id = await submit({ url: media.notFoundUrl, webhook_url: receiver.url });
    const job = await ended(id);
    expect(job).to.include({ status: 'Warning', error_type: 'warning' });
    const hooks = await allDelivered(id);
    const types = hooks.map((h) => h.body.type);
    expect(types.filter((t) => (TERMINAL_EVENT_TYPES as readonly unknown[]).includes(t)), types.join()).to.deep.equal(['job_warning']);
    expect(types).to.deep.equal(['job_processing', 'job_warning']);
    const warning = hooks[1]!;
    expect(warning.body).to.include({ type: 'job_warning', status: 'warning', url: media.notFoundUrl, error: job.error });
    expect(warning.body.error_detail, 'the tool\'s cause').to.be.a('string').and.match(/404/);
    expect(warning.body.error_detail).to.equal(job.error_detail);
    for (const h of hooks) {
      const id = h.headers['webhook-id'] as string;
      const ts = Number(h.headers['webhook-timestamp']);
      expect(h.headers['webhook-signature'], `${String(h.body.type)} signed`).to.equal(signature(key, id, ts, h.raw));
    }
  });

  it('webhook_events ["job_completed"]: no processing or progress event, progress webhooks asked for or not', async () => {
    const id = await submit({ url: media.mp4Url, webhook_url: receiver.url, webhook_events: ['job_completed'], enable_progress_webhook: true });
    const job = await ended(id);
    expect(job.status, String(job.error)).to.equal('Completed');
    const hooks = await allDelivered(id);
    expect(hooks.map((h) => h.body.type)).to.deep.equal(['job_completed']);
    const log = await svc.api('GET', `/jobs/${id}/webhooks`);
    expect((log.body.events as { type: string }[]).map((e) => e.type)).to.deep.equal(['job_completed']);
    // Without the filter, the same request sends them all.
    const all = await submit({ url: media.mp4Url, webhook_url: receiver.url, enable_progress_webhook: true });
    expect((await ended(all)).status).to.equal('Completed');
    const types = (await allDelivered(all)).map((h) => h.body.type);
    expect(types[0]).to.equal('job_processing');
    expect(types.filter((t) => t === 'progress')).to.have.length.greaterThan(0);
    expect(types.at(-1)).to.equal('job_completed');
  });

  it('webhook_events is refused when it names no known event or has no webhook_url', async () => {
    const bad = await svc.api('POST', '/jobs', { url: media.mp4Url, webhook_url: receiver.url, webhook_events: ['job_done'] });
    expect(bad.status).to.equal(400);
    expect(String(bad.body.error)).to.match(/^Invalid field 'webhook_events'/);
    const alone = await svc.api('POST', '/jobs', { url: media.mp4Url, webhook_events: ['job_completed'] });
    expect(alone.status).to.equal(400);
    expect(alone.body.error).to.equal("Invalid field 'webhook_events': needs a webhook_url");
    expect((await svc.api('POST', '/jobs', { url: media.mp4Url, webhook_url: receiver.url, webhook_events: [] })).status).to.equal(400);
  });

  it('a running job shows downloaded_bytes, total_bytes and a speed in GET /jobs/{id}; a finished one no speed', async () => {
    const size = statSync(join(await generateMedia(), MEDIA.mp4.path)).size;
    const id = await submit({ url: media.slowUrl(15) });
    const seen: Record<string, unknown>[] = [];
    const running = await eventually(async () => {
      const j = (await svc.api('GET', `/jobs/${id}`)).body;
      if (j.status === 'Processing' && j.downloaded_bytes !== undefined) seen.push(j);
      return seen.find((x) => x.speed_bps !== undefined);
    }, 60_000, 300);
    expect(running.total_bytes).to.equal(size);
    expect(running.downloaded_bytes).to.be.a('number').within(0, size);
    expect(running.speed_bps).to.be.a('number').greaterThan(0);
    expect(running.eta_seconds).to.be.a('number').at.least(0);
    for (const j of seen) expect(j.downloaded_bytes as number).to.be.at.most(size);
    const job = await ended(id);
    expect(job.status, String(job.error)).to.equal('Completed');
    expect(job).to.include({ downloaded_bytes: size, total_bytes: size });
    expect(job).to.not.have.any.keys('speed_bps', 'eta_seconds', 'error_detail');
  });

  it('a failed job on corrupt media: error_detail is ffmpeg\'s cause, without the URL\'s query string', async () => {
    const query = 'sig=do-not-show-me-7f3a';
    const url = `${corrupt.baseUrl}/corrupt.mp4?${query}`;
    const id = await submit({ url, webhook_url: receiver.url });
    const job = await ended(id);
    expect(job).to.include({ status: 'Failed', error_type: 'error' });
    expect(job.error_detail).to.be.a('string').and.match(/moov atom not found/);
    expect(job.error_detail).to.not.include(query);
    expect(job.error_detail).to.not.match(/\/tmp\/|0x[0-9a-f]{6,}/);
    const failed = await eventually(() => mine(id).find((h) => h.body.type === 'job_failed'), 30_000);
    // `url` is the source as the client gave it (the contract's); the cause never carries it.
    expect(failed.body).to.include({ url, error: job.error, error_detail: job.error_detail });
  });
});
