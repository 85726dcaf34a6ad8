// The operator process: load configuration, start, stop cleanly on SIGTERM
// (Kubernetes) or SIGINT (Ctrl-C), handing the Lease back so a standby
// replica takes over at once.
import { ConfigError } from '@mediajobs/lib/config';
import { createLogger, errFields } from '@mediajobs/lib/logger';
import { loadOperatorConfig } from './config.js';
import { managedStorageAccess } from './managed-storage.js';
import { startOperator } from './operator.js';

const log = createLogger('operator');

async function main(): Promise<void> {
  const cfg = loadOperatorConfig();
  log.level = cfg.LOG_LEVEL;
  const operator = await startOperator(cfg, { storage: await managedStorageAccess(cfg), log });
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'shutting down');
      operator.stop().then(() => process.exit(0), (err: unknown) => {
        log.error({ err: errFields(err) }, 'shutdown failed');
        process.exit(1);
      });
    });
  }
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) log.fatal(err.message);
  else log.fatal({ err: errFields(err) }, 'operator failed to start');
  process.exit(1);
});
