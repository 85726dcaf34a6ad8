// The one configuration loader: every part reads its settings from the
// environment through a zod schema, so a bad value fails at start with the
// variable's name instead of deep inside a request.
import { z } from 'zod';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Parse `env` with `schema`; throws ConfigError naming every bad variable. */
export function loadConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  return result.data;
}

/** Env booleans: "1"/"true"/"yes" and "0"/"false"/"no". */
export const envBoolean = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no', 'TRUE', 'FALSE'])
  .transform((v) => ['1', 'true', 'yes', 'TRUE'].includes(v));

export const envInt = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);

/** Settings every service shares. */
export const commonSchema = z.object({
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** 32-byte keys for the secret box, "kid:base64,kid2:base64"; the first encrypts, all decrypt (rotation). */
  SECRET_KEYS: z.string().min(1).optional(),
});

/** Managed storage: local disk (local mode) or an S3-compatible bucket (production). */
export const managedStorageSchema = z.object({
  MANAGED_STORAGE: z.enum(['local', 's3']).default('local'),
  MANAGED_STORAGE_DIR: z.string().default('.local/storage'),
  /** HMAC key of local download URLs. */
  FILE_URL_SECRET: z.string().min(16).optional(),
  /** Base URL the gateway is reached at, for local download URLs. */
  PUBLIC_BASE_URL: z.string().url().default('http://127.0.0.1:8080'),
  MANAGED_S3_ENDPOINT: z.string().url().optional(),
  MANAGED_S3_BUCKET: z.string().optional(),
  MANAGED_S3_REGION: z.string().default('us-east-1'),
  MANAGED_S3_ACCESS_KEY: z.string().optional(),
  MANAGED_S3_SECRET_KEY: z.string().optional(),
  MANAGED_S3_FORCE_PATH_STYLE: envBoolean.default(true),
});
