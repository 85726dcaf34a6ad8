// What every fault scenario runs against: the whole service with the
// operator as its own process (startService({ operatorProcess: true })),
// generated media on loopback and a webhook receiver.
import { startMediaServer, type MediaServer } from '../support/media.js';
import { startReceiver, startService, type Receiver } from '../e2e/support.js';
import type { ChaosService } from './outside.js';

export interface ChaosFixture {
  svc: ChaosService;
  media: MediaServer;
  receiver: Receiver;
  stop(): Promise<void>;
}

export async function startChaos(operatorEnv: Record<string, string> = {}, databaseAdminUrl?: string): Promise<ChaosFixture> {
  const media = await startMediaServer();
  const receiver = await startReceiver();
  const svc = await startService({ operatorProcess: true, operatorEnv, databaseAdminUrl }).catch(async (err: unknown) => {
    await receiver.stop();
    await media.stop();
    throw err;
  });
  return {
    svc, media, receiver,
    async stop() {
      await svc.stop();
      await receiver.stop();
      await media.stop();
    },
  };
}
