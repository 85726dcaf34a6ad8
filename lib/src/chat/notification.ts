// The chat notification of a job that ended badly (spec: POST /user/chat,
// notification rules): which endings notify at which level, and the message,
// as the chat service's incoming-webhook JSON (a text line and one
// attachment whose `color` is the severity). Only failed jobs notify:
// technical errors in red, content warnings in orange; completed, skipped
// and cancelled jobs never do.
//
// The category shown is the job's error phrase, which is already a fixed
// phrase where it is made (the runner's runner-image/src/classify.ts, the
// operator's permanent failures), never a tool's output; it is cleaned again
// here (no URL, no address, bounded) because a chat channel is read by
// people who must not learn the infrastructure from it.
import type { ErrorType, JobStatus } from '../mediajob/types.js';

export const NOTIFY_LEVELS = ['all', 'errors_only', 'warnings_only'] as const;
export type NotifyLevel = (typeof NOTIFY_LEVELS)[number];

/** The attachment colours: technical errors red, content warnings orange. */
export const CHAT_COLORS = { error: '#D50000', warning: '#FF8C00' } as const;

/** What the notification is made from: the job's row as it ended. */
export interface EndedJob {
  id: string;
  status: JobStatus;
  errorType?: ErrorType | null;
  error?: string | null;
  /** The source URL the client sent. */
  url: string;
}

export interface ChatAttachment {
  color: string;
  title: string;
  fallback: string;
  fields: { title: string; value: string; short: boolean }[];
}

/** The chat service's incoming-webhook message. */
export interface ChatMessage {
  text: string;
  attachments: [ChatAttachment];
}

/** Whether a job's ending is an error or a warning to chat, or nothing to tell. */
export function severityOf(job: Pick<EndedJob, 'status' | 'errorType'>): ErrorType | undefined {
  if (job.status === 'Warning') return 'warning';
  if (job.status === 'Failed') return job.errorType === 'warning' ? 'warning' : 'error';
  return undefined;
}

/** True when `level` asks for endings of this severity. */
export function levelWants(level: NotifyLevel, severity: ErrorType): boolean {
  return level === 'all' || (severity === 'error' ? level === 'errors_only' : level === 'warnings_only');
}

const MAX_CATEGORY = 160;

/** The error phrase without anything that could name a host, an address or a signed URL. */
export function sanitisedCategory(error: string | null | undefined, severity: ErrorType): string {
  const fallback = severity === 'error' ? 'Technical error' : 'Content unavailable';
  if (!error) return fallback;
  const clean = error
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<url>')
    .replace(/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g, '<address>')
    // IPv6: four or more groups, or a `::` (a clock time such as 12:30:45 is neither).
    .replace(/\[?(?:\b(?:[0-9a-f]{1,4}:){3,7}[0-9a-f]{1,4}\b|[0-9a-f:]*::[0-9a-f:]*)\]?(?::\d+)?/gi, '<address>')
    .replace(/\s+/g, ' ')
    .trim();
  if (!clean) return fallback;
  return clean.length > MAX_CATEGORY ? `${clean.slice(0, MAX_CATEGORY - 1)}…` : clean;
}

/** The message for a job's ending at a key's level; undefined when this ending does not notify at it. */
export function chatNotification(job: EndedJob, level: NotifyLevel): ChatMessage | undefined {
  const severity = severityOf(job);
  if (!severity || !levelWants(level, severity)) return undefined;
  const title = severity === 'error' ? 'Media job failed' : 'Media job failed: content warning';
  const category = sanitisedCategory(job.error, severity);
  return {
    text: `${title}: ${job.id}`,
    attachments: [{
      color: CHAT_COLORS[severity],
      title,
      fallback: `${title}: ${job.id} (${category})`,
      fields: [
        { title: 'Job', value: job.id, short: true },
        { title: 'Category', value: category, short: true },
        { title: 'Source', value: job.url, short: false },
      ],
    }],
  };
}
