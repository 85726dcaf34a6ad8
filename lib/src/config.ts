// The one configuration loader: every part reads its settings from the
// environment through a zod schema, so a bad value fails at start with the
// variable's name instead of deep inside a request.
import { z } from 'zod';
import { parseAllowedNetworks, PRIVATE_NETWORKS } from './outbound.js';

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

/** A variable holding JSON, parsed and checked against `schema` at start; the message never echoes the value. */
export const envJson = <T extends z.ZodType>(schema: T) => z.string().transform((text, ctx) => {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be JSON' });
    return z.NEVER;
  }
}).pipe(schema);

/** LOG_FORMAT's values: `auto` writes human lines when standard output is a terminal, JSON lines otherwise (lib/src/logger.ts). */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Settings every service shares. */
export const commonSchema = z.object({
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(LOG_FORMATS).default('auto'),
  /** 32-byte keys for the secret box, "kid:base64,kid2:base64"; the first encrypts, all decrypt (rotation). */
  SECRET_KEYS: z.string().min(1).optional(),
  /** Open values sealed before they were bound to their place (v1), while the reseal command upgrades them (lib/src/secret-box.ts). */
  SECRET_OPEN_UNBOUND: envBoolean.default(false),
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

/** An http(s) URL without user:password (the providers refuse credentials in endpoints too). */
const endpointUrl = z.string().refine((v) => {
  if (!URL.canParse(v)) return false;
  const u = new URL(v);
  return (u.protocol === 'https:' || u.protocol === 'http:') && !u.username && !u.password;
}, 'must be an http(s) URL without credentials');

/**
 * Where the Google-backed destinations (`gcs`, `drive`) send their requests:
 * Private Service Connect or other private endpoints, sovereign clouds and
 * emulators. Deployment settings, never a user's: a destination names only
 * its bucket or folder, and the key file's own `token_uri` is ignored (see
 * lib/src/storage/service-account.ts). Unset means Google's public
 * endpoints. The gateway (probes, /drive-files), the operator (GCS signed
 * URLs name the API host) and the runner (uploads; the operator forwards
 * the values into its pod env) must agree, so all three read this schema.
 */
const storageEndpointFields = {
  /** JSON API root instead of https://storage.googleapis.com (@google-cloud/storage's `apiEndpoint`); signed URLs point at it too. */
  GCS_API_ENDPOINT: endpointUrl.optional(),
  /** OAuth token endpoint the service-account JWT is exchanged at for gcs, instead of https://oauth2.googleapis.com/token. */
  GCS_TOKEN_URI: endpointUrl.optional(),
  /** API root instead of https://www.googleapis.com/ (googleapis' `rootUrl`): Drive v3 and its upload path hang below it. */
  DRIVE_API_ENDPOINT: endpointUrl.optional(),
  /** OAuth token endpoint for drive, as GCS_TOKEN_URI. */
  DRIVE_TOKEN_URI: endpointUrl.optional(),
};

export const storageEndpointsSchema = z.object({
  ...storageEndpointFields,
  /**
   * Refused rather than honoured: @google-cloud/storage reads it from
   * process.env behind the configuration's back, sends JSON API calls to it
   * even when an apiEndpoint is given, and without one drops authentication,
   * so a stray value would split a job's requests between two servers.
   */
  STORAGE_EMULATOR_HOST: z.never({ error: 'is not honoured; set GCS_API_ENDPOINT and GCS_TOKEN_URI instead' }).optional(),
});

export type StorageEndpointsConfig = z.infer<typeof storageEndpointsSchema>;

/** The endpoint variables of storageEndpointsSchema, for forwarding them (operator → runner pods). */
export const STORAGE_ENDPOINT_VARIABLES = Object.keys(storageEndpointFields) as (keyof typeof storageEndpointFields)[];

/** storageEndpointsSchema's values as lib's createProvider options (`gcs`, `drive`); only the settings that are set. */
export function storageEndpoints(config: StorageEndpointsConfig): {
  gcs?: { apiEndpoint?: string; tokenUri?: string };
  drive?: { rootUrl?: string; tokenUri?: string };
} {
  const gcs = {
    ...(config.GCS_API_ENDPOINT && { apiEndpoint: config.GCS_API_ENDPOINT }),
    ...(config.GCS_TOKEN_URI && { tokenUri: config.GCS_TOKEN_URI }),
  };
  const drive = {
    ...(config.DRIVE_API_ENDPOINT && { rootUrl: config.DRIVE_API_ENDPOINT }),
    ...(config.DRIVE_TOKEN_URI && { tokenUri: config.DRIVE_TOKEN_URI }),
  };
  return { ...(Object.keys(gcs).length ? { gcs } : {}), ...(Object.keys(drive).length ? { drive } : {}) };
}

/**
 * The allowance of the outbound-address policy (lib/src/outbound.ts): what
 * the service may contact for users although it is refused by default.
 * OUTBOUND_ALLOW_PRIVATE opens loopback and the private ranges at once
 * (PRIVATE_NETWORKS; false in production, true in local mode);
 * OUTBOUND_ALLOWED_CIDRS names networks one by one (comma-separated CIDRs,
 * e.g. a MinIO's). Both combine. Link-local and cloud metadata addresses
 * cannot be allowed by either. A service's loader joins the two with
 * withOutboundAllowance.
 */
export const outboundSchema = z.object({
  OUTBOUND_ALLOWED_CIDRS: z.string().default('').transform((text, ctx) => {
    const parsed = parseAllowedNetworks(text);
    if (parsed.ok) return parsed.networks;
    ctx.addIssue({ code: 'custom', message: parsed.error });
    return z.NEVER;
  }),
  OUTBOUND_ALLOW_PRIVATE: envBoolean.default(false),
});

export type OutboundConfig = z.infer<typeof outboundSchema>;

/**
 * The allowance in force, as OUTBOUND_ALLOWED_CIDRS: the networks listed
 * there, and PRIVATE_NETWORKS under OUTBOUND_ALLOW_PRIVATE. Applied by each
 * service's loader (a zod object with a transform could no longer be
 * merged into the services' schemas), so every policy built from
 * OUTBOUND_ALLOWED_CIDRS honours both, and the operator forwards what is in
 * force to runner pods.
 */
export function withOutboundAllowance<C extends OutboundConfig>(cfg: C): C {
  if (!cfg.OUTBOUND_ALLOW_PRIVATE) return cfg;
  return { ...cfg, OUTBOUND_ALLOWED_CIDRS: [...new Set([...cfg.OUTBOUND_ALLOWED_CIDRS, ...PRIVATE_NETWORKS])] };
}
