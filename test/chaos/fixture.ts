// What every fault scenario runs against: the whole service with the
// operator as its own process (startService({ operatorProcess: true })),
// generated media on loopback and a webhook receiver. Every process logs at
// debug, and scanLogs() searches all of it (the gateway's lines, every
// operator process' output, every runner pod's log) for each secret the run
// used (issue 16 item 5).
import { startMediaServer, type MediaServer } from '../support/media.js';
import { runnerLogs, startReceiver, startService, type Receiver } from '../e2e/support.js';
import { findLeaks, secretKeysOf, type LogText, type RunSecret } from '../support/secret-scan.js';
import type { ChaosService } from './outside.js';

export interface LogScan {
  /** Logs searched: the gateway, the operator processes together, one per runner pod. */
  sources: number;
  bytes: number;
  /** Each secret found, by kind and a short prefix (never the secret). */
  leaks: string[];
}

export interface ChaosFixture {
  svc: ChaosService;
  media: MediaServer;
  receiver: Receiver;
  /** Search every process' log output so far for the run's secrets; call before stop (runner pods go with the cluster). */
  scanLogs(): Promise<LogScan>;
  stop(): Promise<void>;
}

export async function startChaos(
  operatorEnv: Record<string, string> = {}, databaseAdminUrl?: string, storageEnv?: Record<string, string>,
): Promise<ChaosFixture> {
  const media = await startMediaServer();
  const receiver = await startReceiver();
  const gatewayLines: string[] = [];
  const svc = await startService({
    operatorProcess: true, operatorEnv, databaseAdminUrl, storageEnv, logLevel: 'debug',
    logDestination: { write: (line: string) => void gatewayLines.push(line) },
  }).catch(async (err: unknown) => {
    await receiver.stop();
    await media.stop();
    throw err;
  });
  // Deliveries are signed, so the signing secret is one the logs must not hold.
  const signing = await svc.api('POST', '/user/webhook-secret');
  const secrets: RunSecret[] = [
    { kind: 'API key', value: svc.apiKey },
    { kind: 'webhook URL', value: receiver.url },
    { kind: 'webhook signing secret', value: String(signing.body.secret) },
    { kind: 'FILE_URL_SECRET', value: String(svc.env.FILE_URL_SECRET) },
    ...secretKeysOf(String(svc.env.SECRET_KEYS)),
  ];
  return {
    svc, media, receiver,
    async scanLogs() {
      const logs: LogText[] = [
        { source: 'gateway', text: gatewayLines.join('') },
        { source: 'operator processes', text: svc.operator.output() },
        ...await runnerLogs(svc),
      ];
      return { sources: logs.length, bytes: logs.reduce((n, l) => n + Buffer.byteLength(l.text), 0), leaks: findLeaks(secrets, logs) };
    },
    async stop() {
      await svc.stop();
      await receiver.stop();
      await media.stop();
    },
  };
}
