// What a storage configuration request must pass before anything is saved:
// whose destination it manages (`?owner=`), the `default` flag, and the
// spec's verification of the credentials (fields, lib's shape check and
// constructor, the live check), each failure an HttpError with the spec's
// message. The endpoints themselves are in user-storage.ts.
import type { Request, Response } from 'express';
import type { StorageProviderName } from '@mediajobs/lib/mediajob/types';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import { DRIVE_REASON_TEXT, parseDestination } from '@mediajobs/lib/storage/index';
import { StorageError } from '@mediajobs/lib/storage/types';
import type pg from 'pg';
import { z } from 'zod';
import { FieldError, destinationDocument } from '../destinations/fields.js';
import { isForbiddenEndpoint } from '../destinations/job-destination.js';
import { DestinationCheckError, probeDestination, verifyBucketListing, type ProbeBounds, type ProviderSettings } from '../destinations/probe.js';
import { isOrgAdmin } from '../destinations/store.js';
import type { Owner } from '../destinations/vault.js';
import { HttpError } from '../http-errors.js';
import { oneOfParam, parseQuery } from '../query.js';

/** The storage endpoints' query (also their parameter in the OpenAPI document). */
export const ownerQuery = z.object({
  owner: oneOfParam(['key', 'organization'], { why: "must be 'key' or 'organization'", def: 'key' })
    .describe("Whose destination: the key's, or its organization's (organization admin keys only)."),
});

/**
 * Whose destination a request manages: the key's own, or with
 * `?owner=organization` its organization's, which only an organization
 * admin key may change or read.
 */
export async function ownerOf(req: Request, res: Response, pool: pg.Pool): Promise<Owner> {
  const p = res.locals.principal!;
  const { owner } = parseQuery(ownerQuery, req.query);
  if (owner === 'key') return { kind: 'api_key', id: p.apiKeyId };
  if (!p.organizationId) throw new HttpError(400, 'This API key belongs to no organization');
  if (!(await isOrgAdmin(pool, p.apiKeyId))) {
    throw new HttpError(403, "Only an organization admin key can manage the organization's storage destinations");
  }
  return { kind: 'organization', id: p.organizationId };
}

/** The body's `default`: true, false, or absent (keep the mark as it was). */
export function parseDefault(body: Record<string, unknown>): boolean | undefined {
  const v = body.default;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new HttpError(400, "Invalid field 'default': must be a boolean (true or false)");
  return v;
}

/**
 * The spec's messages for a configuration that fails its checks. GCS has
 * its own wording for service account problems, Drive for every problem
 * before the probe; everything else is `Credential validation failed`.
 */
function credentialMessage(provider: StorageProviderName, err: FieldError | StorageError | DestinationCheckError): string {
  if (provider === 'drive' && !(err instanceof DestinationCheckError && err.stage === 'probe')) {
    return err instanceof FieldError && err.serviceAccountMessage ? 'Invalid configuration: invalid service account JSON' : `Invalid configuration: ${err.reason}`;
  }
  if (err instanceof FieldError && err.serviceAccountMessage) return err.serviceAccountMessage;
  // Drive's reasons have the spec's wording (`insufficient permissions on folder`); the
  // other providers' reasons are the backend's own codes (`AuthenticationFailed`, `NoSuchBucket`).
  const reason = provider === 'drive' ? DRIVE_REASON_TEXT[err.reason] ?? err.reason : err.reason;
  return `Credential validation failed: ${reason}`;
}

/** Steps 1 and 2 of the spec's verification: fields and format, then lib's shape check. No network call. */
function checkedDocument(
  provider: StorageProviderName, body: Record<string, unknown>, outbound: OutboundPolicy, message: (e: FieldError | StorageError) => string,
) {
  try {
    const document = destinationDocument(provider, body);
    if (isForbiddenEndpoint(document.endpoint, outbound)) throw new FieldError('invalid_endpoint');
    parseDestination(document);
    return document;
  } catch (err) {
    if (err instanceof FieldError || err instanceof StorageError) throw new HttpError(400, message(err));
    throw err;
  }
}

/** STORAGE_PROBE_TIMEOUT_MS and STORAGE_PROBE_MAX_BYTES: what one live check may take (its addresses are the gateway's policy). */
export type ProbeBudget = Omit<ProbeBounds, 'outbound'>;

/** Run a live check; its DestinationCheckError becomes a 400 with `message`. */
async function live(check: Promise<void>, message: (e: DestinationCheckError) => string): Promise<void> {
  try {
    await check;
  } catch (err) {
    if (err instanceof DestinationCheckError) throw new HttpError(400, message(err));
    throw err;
  }
}

/**
 * POST /user/<provider>'s verification, in the spec's order: fields, shape,
 * then the client is built and verify_credentials.txt uploaded and deleted.
 * Returns the destination document (credentials included) to be stored.
 */
export async function verifiedDestination(
  provider: StorageProviderName, body: Record<string, unknown>, outbound: OutboundPolicy, budget: ProbeBudget, settings?: ProviderSettings,
): Promise<Record<string, unknown>> {
  const document = checkedDocument(provider, body, outbound, (e) => credentialMessage(provider, e));
  await live(probeDestination(document, { ...budget, outbound }, settings), (e) => credentialMessage(provider, e));
  return document;
}

export const BUCKET_FIELDS = ['endpoint', 'bucket', 'region', 'access_key', 'secret_key'] as const;

/** The deprecated POST /user/bucket's verification: its five fields only, then a listing of the bucket. */
export async function verifiedBucket(body: Record<string, unknown>, outbound: OutboundPolicy, budget: ProbeBudget): Promise<Record<string, unknown>> {
  const only: Record<string, unknown> = {};
  for (const k of BUCKET_FIELDS) only[k] = body[k];
  const document = checkedDocument('s3', only, outbound, (e) => `Verification failed: ${e.reason}`);
  await live(verifyBucketListing(document, { ...budget, outbound }), (e) => `Verification failed: ${e.reason}`);
  return document;
}
