// Chat notifications end to end below the gateway: a job's ending recorded
// by the status mirror (syncStatus) queues the notification its key's
// setting asks for, in the same transaction, and the outbox dispatcher posts
// it to a local receiver standing in for the chat service: the chat
// service's JSON as it is, unsigned, red for technical errors and orange for
// content warnings; nothing for completed or cancelled jobs.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { pino } from 'pino';
import { CHAT_COLORS, type NotifyLevel } from '@mediajobs/lib/chat/notification';
import { saveChatSetting } from '@mediajobs/lib/db/chat-settings';
import { cancelJob, syncStatus } from '@mediajobs/lib/db/jobs';
import type { MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { OutboxDispatcher } from '../src/outbox.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';

interface Received { path: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }

describe('operator: chat notifications of failed jobs, through the outbox', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let server: Server;
  let base: string;
  const got: Received[] = [];
  const box = new SecretBox(SecretBox.generateSpec('chat'));
  let dispatcher: OutboxDispatcher;

  before(async () => {
    db = await createTestDatabase('mediajobs_outbox_chat');
    server = createServer((req, res) => {
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (text += c));
      req.on('end', () => {
        got.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(text) as Record<string, unknown> });
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/services`;
    dispatcher = new OutboxDispatcher(db.pool, box, pino({ level: 'silent' }), {
      timeoutMs: 2000, attempts: 3, backoffMs: 100, pollMs: 50, outbound: { allowed: ['127.0.0.0/8'] },
    });
    await dispatcher.start();
  });

  after(async () => {
    await dispatcher?.stop();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
    await db?.drop();
  });

  /** A key with a chat setting at `level` (its own receiver path), and a Processing job of it. */
  async function jobOfKeyWith(level: NotifyLevel | undefined): Promise<{ jobId: string; path: string }> {
    const apiKeyId = randomUUID();
    const path = `/services/${apiKeyId}`;
    if (level) await saveChatSetting(db.pool, apiKeyId, box.sealable(`${base}/${apiKeyId}`), level);
    const jobId = randomUUID();
    await db.pool.query(`INSERT INTO jobs (id, api_key_id, url, status, step, progress, options)
      VALUES ($1, $2, 'https://www.youtube.com/watch?v=abcdefghijk', 'Processing', 'Downloading', 0, '{}')`, [jobId, apiKeyId]);
    return { jobId, path };
  }

  const end = (jobId: string, s: MediaJobStatus) => syncStatus(db.pool, jobId, s, () => []);
  const FAILED: MediaJobStatus = { status: 'Failed', errorType: 'error', error: 'Connection error while downloading the media' };
  const WARNED: MediaJobStatus = { status: 'Warning', errorType: 'warning', error: 'Video is private' };

  async function settle(): Promise<void> {
    // Every queued chat row delivered (or none queued): the receiver has all there is.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const open = await db.pool.query(`SELECT 1 FROM outbox WHERE channel = 'chat' AND delivered_at IS NULL AND failed_at IS NULL`);
      if (!open.rowCount || Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const to = (path: string) => got.filter((g) => g.path === path);

  it('a technical failure: one red message with the job id, the category and the source URL, unsigned', async () => {
    const { jobId, path } = await jobOfKeyWith('all');
    await end(jobId, FAILED);
    await settle();
    const [m, ...more] = to(path);
    expect(more).to.have.length(0);
    expect(m!.headers['content-type']).to.equal('application/json');
    expect(m!.headers).not.to.have.property('webhook-signature');
    const attachment = (m!.body.attachments as Record<string, unknown>[])[0]!;
    expect(attachment.color).to.equal(CHAT_COLORS.error);
    expect(attachment.fields).to.deep.equal([
      { title: 'Job', value: jobId, short: true },
      { title: 'Category', value: 'Connection error while downloading the media', short: true },
      { title: 'Source', value: 'https://www.youtube.com/watch?v=abcdefghijk', short: false },
    ]);
    expect(m!.body).not.to.have.property('event_id');
  });

  it('a content warning: orange for warnings_only, nothing for errors_only', async () => {
    const warnings = await jobOfKeyWith('warnings_only');
    const errors = await jobOfKeyWith('errors_only');
    await end(warnings.jobId, WARNED);
    await end(errors.jobId, WARNED);
    await settle();
    expect(to(warnings.path).map((m) => (m.body.attachments as { color: string }[])[0]!.color)).to.deep.equal([CHAT_COLORS.warning]);
    expect(to(errors.path)).to.deep.equal([]);
  });

  it('completed and cancelled jobs, and keys without a setting, never notify', async () => {
    const completed = await jobOfKeyWith('all');
    const cancelled = await jobOfKeyWith('all');
    const unset = await jobOfKeyWith(undefined);
    await end(completed.jobId, { status: 'Completed', step: 'Finished', progress: 100 });
    await cancelJob(db.pool, cancelled.jobId, 'CancelledByAdmin');
    await end(unset.jobId, FAILED);
    await settle();
    expect(to(completed.path).concat(to(cancelled.path), to(unset.path))).to.deep.equal([]);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM outbox WHERE channel = 'chat' AND payload->>'text' LIKE '%' || $1`, [unset.jobId])).rows[0].n).to.equal(0);
  });

  it('a failure mirrored twice (a replayed status) notifies once', async () => {
    const { jobId, path } = await jobOfKeyWith('all');
    await end(jobId, FAILED);
    await end(jobId, FAILED);
    await settle();
    expect(to(path)).to.have.length(1);
  });
});
