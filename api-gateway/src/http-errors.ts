// Every error the gateway sends is {"error": "..."}; the helpers keep it so.
import type { Response } from 'express';

export class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly extra: Record<string, unknown> = {}) {
    super(message);
    this.name = 'HttpError';
  }
}

export function sendError(res: Response, status: number, message: string, extra: Record<string, unknown> = {}): void {
  res.status(status).json({ error: message, ...extra });
}
