export * from './config.js';
export * from './logger.js';
export * from './secret-box.js';
