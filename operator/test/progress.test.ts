// Progress webhooks: which stages a status has reached, where they go among
// a transition's events, and, on real Postgres, that each stage is written
// once however often it is seen and that a job's events are delivered in
// order even when one of them has to be retried.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type pg from 'pg';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import type { MediaJob, MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { syncStatus, type JobRow } from '@mediajobs/lib/db/jobs';
import { eventId } from '@mediajobs/lib/db/outbox';
import { OutboxDispatcher } from '../src/outbox.js';
import { PROGRESS_STAGES, eventsFor, progressEvents, stagesReached, withProgressEvents } from '../src/webhook-events.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';

const row = { id: '0b7c0f5e-1111-4222-8333-944445555666', url: 'http://m/live.m3u8' };

function mj(enableProgressWebhook: boolean): Pick<MediaJob, 'spec'> {
  return { spec: { enableProgressWebhook } as MediaJob['spec'] };
}

const stagesOf = (events: { type: string; payload: Record<string, unknown> }[]) =>
  events.map((e) => (e.type === 'progress' ? `${e.payload.stage as string}:${e.payload.progress_percent as number}` : e.type));

describe('operator: progress webhooks', () => {
  describe('stages', () => {
    it('follow the runner\'s step and progress', () => {
      const reached = (s: MediaJobStatus) => PROGRESS_STAGES.slice(0, stagesReached(s)).map((x) => x.stage);
      expect(reached({ status: 'Pending', step: 'Queued', progress: 0 })).to.deep.equal([]);
      expect(reached({ status: 'Processing', step: 'Downloading', progress: 12 })).to.deep.equal(['downloading']);
      expect(reached({ status: 'Processing', step: 'Downloading', progress: 33 })).to.deep.equal(['downloading', 'download_complete']);
      expect(reached({ status: 'Processing', step: 'Muxing', progress: 40 })).to.deep.equal(['downloading', 'download_complete', 'muxing']);
      expect(reached({ status: 'Processing', step: 'Uploading', progress: 70 })).to.have.length(5);
      expect(reached({ status: 'Completed', step: 'Finished', progress: 100 })).to.have.length(5);
      // a job that failed while muxing has announced the stages it reached, no more
      expect(reached({ status: 'Failed', step: 'Muxing', progress: 50 })).to.deep.equal(['downloading', 'download_complete', 'muxing']);
    });

    it('payloads are exactly the spec\'s fields, each stage with its own stable key', () => {
      const events = progressEvents({ status: 'Processing', step: 'Uploading', progress: 66 }, row);
      expect(stagesOf(events)).to.deep.equal(['downloading:0', 'download_complete:33', 'muxing:33', 'mux_complete:66', 'uploading:66']);
      for (const e of events) expect(e.payload).to.have.all.keys('type', 'job_id', 'url', 'stage', 'progress_percent');
      expect(new Set(events.map((e) => eventId(row.id, e.key!))).size).to.equal(5);
      expect(events.map((e) => eventId(row.id, e.key!))).to.not.include(eventId(row.id, 'progress'));
    });

    it('go after job_processing and before the terminal event, only when the job asked for them', () => {
      const done: MediaJobStatus = { status: 'Completed', step: 'Finished', progress: 100, result: { storageKey: 'videos/a.mp4', fileSize: 1 } };
      const base = eventsFor('Pending', done, row as JobRow, { spec: { folder: undefined } } as MediaJob, {});
      expect(stagesOf(withProgressEvents(base, done, row, mj(true)))).to.deep.equal([
        'job_processing', 'downloading:0', 'download_complete:33', 'muxing:33', 'mux_complete:66', 'uploading:66', 'job_completed',
      ]);
      expect(stagesOf(withProgressEvents(base, done, row, mj(false)))).to.deep.equal(['job_processing', 'job_completed']);
      // Processing → Processing: no transition event, only the stages
      expect(stagesOf(withProgressEvents([], { status: 'Processing', step: 'Downloading', progress: 5 }, row, mj(true)))).to.deep.equal(['downloading:0']);
    });
  });

  describe('outbox on Postgres', function () {
    this.timeout(30_000);
    let db: TestDatabase;
    let box: SecretBox;
    let server: Server;
    let receiverUrl: string;
    const received: { jobId: string; stage: string }[] = [];
    let failFirst: string | undefined;

    before(async () => {
      db = await createTestDatabase('mediajobs_progress');
      box = new SecretBox(SecretBox.generateSpec('t1'));
      server = createServer((req, res) => {
        let text = '';
        req.on('data', (c: Buffer) => (text += c.toString()));
        req.on('end', () => {
          const body = JSON.parse(text) as Record<string, unknown>;
          const stage = (body.stage as string | undefined) ?? (body.type as string);
          // Only the named job's stage fails: the first test's job has the same stages, and deliveries of jobs run concurrently.
          if (`${body.job_id as string}:${stage}` === failFirst) {
            failFirst = undefined;
            res.writeHead(503).end();
            return;
          }
          received.push({ jobId: body.job_id as string, stage });
          res.writeHead(200).end('ok');
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    });
    after(async () => {
      await new Promise((r) => server?.close(r));
      await db?.drop();
    });

    async function jobRow(): Promise<string> {
      const id = randomUUID();
      const keyId = await insertApiKey(db.pool);
      await db.pool.query(
        `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc) VALUES ($1, $2, $3, 'Pending', 'Queued', 0, '{}', $4)`,
        [id, keyId, row.url, box.seal(receiverUrl, sealedAt.jobWebhook(id))]);
      return id;
    }

    const sync = (pool: pg.Pool, id: string, s: MediaJobStatus) =>
      syncStatus(pool, id, s, (old, r) => withProgressEvents(eventsFor(old, s, r, { spec: {} } as MediaJob, {}), s, r, mj(true)));

    it('writes each stage once, however often a status is seen, in stage order', async () => {
      const odb = db.pool;
      const id = await jobRow();
      await sync(odb, id, { status: 'Processing', step: 'Downloading', progress: 0 });
      await sync(odb, id, { status: 'Processing', step: 'Downloading', progress: 20 });
      // the operator never saw Muxing: Uploading implies it
      await sync(odb, id, { status: 'Processing', step: 'Uploading', progress: 70 });
      await sync(odb, id, { status: 'Processing', step: 'Uploading', progress: 90 });
      await sync(odb, id, { status: 'Completed', step: 'Finished', progress: 100, result: { storageKey: 'videos/x.mp4', fileSize: 1 } });
      const r = await db.pool.query<{ type: string; payload: Record<string, unknown> }>('SELECT type, payload FROM outbox WHERE job_id = $1 ORDER BY id', [id]);
      expect(r.rows.map((x) => (x.type === 'progress' ? x.payload.stage : x.type))).to.deep.equal([
        'job_processing', 'downloading', 'download_complete', 'muxing', 'mux_complete', 'uploading', 'job_completed',
      ]);
    });

    it('a progress event carries exactly the download figures the row (GET /jobs/{id}) keeps, for fractional, huge or late figures', async () => {
      // A runner writes its own status (kubectl may too): both read it by one rule.
      const cases: MediaJobStatus[] = [
        { status: 'Processing', step: 'Downloading', progress: 5, download: { downloadedBytes: 1500.5, totalBytes: 1_000_000, speedBps: 12.7, etaSeconds: 3.2 } },
        { status: 'Processing', step: 'Downloading', progress: 5, download: { downloadedBytes: 2 ** 60, totalBytes: 1e300, speedBps: 100_000, etaSeconds: 3e9 } },
        { status: 'Processing', step: 'Downloading', progress: 5, download: { downloadedBytes: 400, totalBytes: 1000, speedBps: 100, etaSeconds: 2 ** 31 - 1 } },
        { status: 'Processing', step: 'Muxing', progress: 40, download: { downloadedBytes: 1000, totalBytes: 1000, speedBps: 100, etaSeconds: 0 } },
      ];
      const kept: Record<string, number>[] = [];
      for (const s of cases) {
        const id = await jobRow();
        await sync(db.pool, id, s);
        const r = await db.pool.query<Record<string, string | number | null>>(
          'SELECT downloaded_bytes::float8 AS downloaded_bytes, total_bytes::float8 AS total_bytes, speed_bps::float8 AS speed_bps, eta_seconds FROM jobs WHERE id = $1', [id]);
        const columns = Object.fromEntries(Object.entries(r.rows[0]!).filter((e): e is [string, number] => e[1] !== null));
        const hooks = await db.pool.query<{ payload: Record<string, unknown> }>(
          "SELECT payload FROM outbox WHERE job_id = $1 AND type = 'progress' ORDER BY id DESC LIMIT 1", [id]);
        const { type: _t, job_id: _j, url: _u, stage: _s, progress_percent: _p, event_id: _e, ...figures } = hooks.rows[0]!.payload;
        expect(figures, JSON.stringify(s.download)).to.deep.equal(columns);
        kept.push(columns);
      }
      expect(kept).to.deep.equal([
        { total_bytes: 1_000_000 },
        { speed_bps: 100_000 },
        { downloaded_bytes: 400, total_bytes: 1000, speed_bps: 100, eta_seconds: 2 ** 31 - 1 },
        { downloaded_bytes: 1000, total_bytes: 1000 },
      ]);
    });

    it('delivers a job\'s events in order even when one needs a retry', async () => {
      const odb = db.pool;
      const id = await jobRow();
      failFirst = `${id}:muxing`;
      received.length = 0;
      await sync(odb, id, { status: 'Processing', step: 'Uploading', progress: 66 });
      await sync(odb, id, { status: 'Completed', step: 'Finished', progress: 100, result: { storageKey: 'videos/y.mp4', fileSize: 1 } });
      const dispatcher = new OutboxDispatcher(db.pool, box, pino({ level: 'silent' }), { timeoutMs: 2000, attempts: 3, backoffMs: 200, pollMs: 50, outbound: { allowed: ['127.0.0.0/8'] } });
      await dispatcher.start();
      try {
        const deadline = Date.now() + 15_000;
        while (received.filter((x) => x.jobId === id).length < 7 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      } finally {
        await dispatcher.stop();
      }
      expect(received.filter((x) => x.jobId === id).map((x) => x.stage)).to.deep.equal([
        'job_processing', 'downloading', 'download_complete', 'muxing', 'mux_complete', 'uploading', 'job_completed',
      ]);
      const attempts = await db.pool.query<{ attempts: number }>(`SELECT attempts FROM outbox WHERE job_id = $1 AND payload->>'stage' = 'muxing'`, [id]);
      expect(attempts.rows[0]!.attempts).to.equal(2);
    });
  });
});
