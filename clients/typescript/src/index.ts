// @mediajobs/client: the TypeScript SDK of the media download jobs API.
export { MediaJobsClient } from './client.js';
export type { ClientOptions, CreateOptions, JobPagesOptions, RequestOptions, RetryInfo, WaitOptions } from './client.js';
export { ApiError, ConfigurationError, ConnectionError, WebhookVerificationError } from './errors.js';
export { RETRY_DEFAULTS, type RetryOptions } from './retry.js';
export { progressOf, type JobProgress } from './progress.js';
export { DEFAULT_TOLERANCE_SECONDS, verifyWebhook, type VerifyOptions, type WebhookHeaders } from './webhooks.js';
export * from './types.js';
export type { components, operations, paths, webhooks } from './generated/openapi.js';
