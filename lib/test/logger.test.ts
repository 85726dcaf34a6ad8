// The logger censors secret-named fields at any depth and leaves everything
// else (and the caller's objects) as it was.
import { expect } from 'chai';
import { Writable } from 'node:stream';
import { ApiException } from '@kubernetes/client-node';
import { createLogger, errFields, humanLines, logFormatOf, redactSecrets, redactUrls } from '../src/logger.js';

function capture(): { lines: () => Record<string, unknown>[]; stream: Writable } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(c: Buffer, _e, cb) {
      chunks.push(c.toString());
      cb();
    },
  });
  return { stream, lines: () => chunks.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('logger redaction', () => {
  it('censors secrets at any depth, header names with dashes and any case included', () => {
    const out = capture();
    const log = createLogger('t', 'info', {}, out.stream);
    log.info({
      req: { headers: { 'X-Api-Key': 'mj_secret', host: 'h' } },
      body: { storage: { secret_key: 's' }, url: 'u' },
      list: [{ webhook_url: 'https://hooks/x' }],
    }, 'hello');
    const [line] = out.lines();
    expect(line).to.deep.include({
      msg: 'hello',
      req: { headers: { 'X-Api-Key': '[redacted]', host: 'h' } },
      body: { storage: '[redacted]', url: 'u' },
      list: [{ webhook_url: '[redacted]' }],
    });
    expect(JSON.stringify(line)).to.not.match(/mj_secret|hooks\/x/);
  });

  it('does not modify the caller\'s object and keeps errors intact', () => {
    const err = new Error('boom');
    const input = { nested: { password: 'p' }, err };
    const r = redactSecrets(input) as typeof input;
    expect(input.nested.password).to.equal('p');
    expect(r.nested.password).to.equal('[redacted]');
    expect(r.err).to.equal(err);
    const clean = { a: 1, b: { c: [1, 2] } };
    expect(redactSecrets(clean)).to.equal(clean);
  });

  it('still serialises errors logged under err', () => {
    const out = capture();
    createLogger('t', 'info', {}, out.stream).error({ err: new Error('boom'), token: 't' }, 'failed');
    const [line] = out.lines();
    expect(line).to.include({ token: '[redacted]' });
    expect((line!.err as { message: string }).message).to.equal('boom');
  });
});

describe('errFields', () => {
  it('keeps a client-node error to its status and Status reason, never its body', () => {
    const body = JSON.stringify({ kind: 'Status', reason: 'AlreadyExists', message: 'secrets "s" already exists', details: { data: 'c2VjcmV0' } });
    const fields = errFields(new ApiException(409, 'Conflict', body, { 'content-type': 'application/json' }));
    expect(fields).to.deep.equal({ name: 'Error', status: 409, reason: 'AlreadyExists' });
    expect(JSON.stringify(fields)).to.not.include('c2VjcmV0');
  });

  it('keeps name, code and a message with signed URLs cut at their query', () => {
    const err = Object.assign(new Error('GET https://bucket.example/v.mp4?X-Amz-Signature=abc failed'), { code: 'ECONNRESET' });
    expect(errFields(err)).to.deep.equal({ name: 'Error', code: 'ECONNRESET', message: 'GET https://bucket.example/v.mp4?… failed' });
  });

  it('takes the HTTP status an SDK error carries, and copes with thrown non-errors', () => {
    const s3 = Object.assign(new Error('Access Denied'), { name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
    expect(errFields(s3)).to.include({ name: 'AccessDenied', status: 403 });
    expect(errFields('plain')).to.deep.equal({ message: 'plain' });
  });
});

describe('log format', () => {
  it('LOG_FORMAT: human lines on a terminal unless json, JSON lines elsewhere unless pretty; an unknown value counts as auto', () => {
    expect(logFormatOf(undefined, true)).to.equal('pretty');
    expect(logFormatOf(undefined, false)).to.equal('json');
    expect(logFormatOf('auto', false)).to.equal('json');
    expect(logFormatOf('json', true)).to.equal('json');
    expect(logFormatOf('pretty', false)).to.equal('pretty');
    expect(logFormatOf('yaml', true)).to.equal('pretty');
  });

  it('a human line: local time, level, component, message and the fields as key=value, secrets as censored as in JSON', () => {
    const out: string[] = [];
    const log = createLogger('operator', 'info', {}, humanLines({ write: (l: string) => void out.push(l) }, false));
    const before = new Date();
    log.info({ jobId: 'j1', size: '12.4 MB', where: 'managed:k/v.mp4', attempt: 2, apiKey: 'mj_secret', err: { code: 'ECONNRESET' } }, 'job completed');
    log.warn({ err: errFields(new Error('boom')) }, 'something failed');
    expect(out).to.have.length(2);
    const hhmm = `${String(before.getHours()).padStart(2, '0')}:${String(before.getMinutes()).padStart(2, '0')}`;
    expect(out[0]).to.match(new RegExp(`^\\[${hhmm}:\\d\\d\\.\\d{3}\\] INFO \\(operator\\): job completed `));
    expect(out[0]).to.include('jobId=j1 size="12.4 MB" where=managed:k/v.mp4 attempt=2 apiKey=[redacted] err.code=ECONNRESET\n');
    expect(out[0]).to.not.include('mj_secret');
    // errFields' object reads as its fields, without the serializer's type and empty stack.
    expect(out[1]).to.match(/\] WARN \(operator\): something failed err\.message=boom err\.name=Error\n$/);
    expect(out.join('')).to.not.include('{');
  });

  it('an Error logged whole keeps its stack, on the lines below', () => {
    const out: string[] = [];
    createLogger('t', 'info', {}, humanLines({ write: (l: string) => void out.push(l) }, false)).error({ err: new Error('real') }, 'crashed');
    const lines = out.join('').split('\n');
    expect(lines[0]).to.match(/ERROR \(t\): crashed err\.type=Error err\.message=real$/);
    expect(lines[1]).to.equal('    Error: real');
    expect(lines[2]).to.match(/^ {8}at /);
  });
});

describe('redactUrls', () => {
  it('drops URL credentials of every scheme that has them', () => {
    expect(redactUrls('via socks5h://u:p@proxy.example:1080 and http://host/x')).to.equal('via socks5h://proxy.example:1080 and http://host/x');
  });

  it('drops a password holding an unescaped @ whole, and the credentials and queries of the streams yt-dlp and ffmpeg read', () => {
    expect(redactUrls('proxy http://user:pa@ss@proxy.example:3128/ refused')).to.equal('proxy http://proxy.example:3128/ refused');
    expect(redactUrls('rtsp://cam:hunter2@10.0.0.9/live and mmsh://u:p@h/x failed')).to.equal('rtsp://10.0.0.9/live and mmsh://h/x failed');
    expect(redactUrls('rtmps://h/app?token=abc wss://h/ws?key=k')).to.equal('rtmps://h/app?… wss://h/ws?…');
    expect(redactUrls('http://h/a@b?q=1 stays a path')).to.equal('http://h/a@b?… stays a path');
  });
});
