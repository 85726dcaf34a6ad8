// The benchmark's baseline: a bare express handler doing one INSERT into a
// table shaped like jobs (same columns, indexes and constraints), with the
// same pool size and a prepared statement: the floor the gateway is
// measured against. Started by post-jobs.ts in its own process.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import express from 'express';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.PG_POOL_MAX ?? 20) });
const app = express();
app.post('/jobs', express.json({ limit: '1mb' }), async (req, res) => {
  const id = randomUUID();
  const body = req.body as { url?: unknown };
  await pool.query({
    name: 'bare-insert',
    text: 'INSERT INTO bare_jobs (id, api_key_id, url, options) VALUES ($1, $2, $3, $4)',
    values: [id, '00000000-0000-4000-8000-000000000000', String(body.url), JSON.stringify(body)],
  });
  res.status(201).json({ job_id: id });
});
const server = createServer(app);
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('bare server listening\n'));
process.on('SIGTERM', () => server.close(() => void pool.end().then(() => process.exit(0))));
