// The gateway process: load configuration, start, and stop cleanly on
// SIGTERM (Kubernetes) or SIGINT (Ctrl-C).
import { ConfigError } from '@mediajobs/lib/config';
import { createLogger, errFields } from '@mediajobs/lib/logger';
import { loadGatewayConfig } from './config.js';
import { startGateway } from './server.js';

const logger = createLogger('api-gateway');

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  logger.level = config.LOG_LEVEL;
  // Its "api-gateway listening" log line (with the url) is what launchers wait for.
  const gateway = await startGateway(config, { logger });
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      gateway.close().then(() => process.exit(0), (err: unknown) => {
        logger.error({ err: errFields(err) }, 'shutdown failed');
        process.exit(1);
      });
    });
  }
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) logger.fatal(err.message);
  else logger.fatal({ err: errFields(err) }, 'api-gateway failed to start');
  process.exit(1);
});
