/**
 * The error of every API client (the sidebar's and the admin page's): an answer other than
 * 2xx, or none at all, with the panel-wide problem it stands for. No JupyterLab imports, so
 * that the admin page's bundle stays small.
 */
import { PanelProblem } from './types';

/** An answer other than 2xx, or no answer at all, with what the panel should say. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly reason: string | null = null
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** The panel-wide message this error stands for, or null for a per-request failure. */
  get problem(): PanelProblem | null {
    return problemOf(this.status);
  }
}

/** 404 on a collection route: the server extension is not enabled on this server. */
export function problemOf(status: number): PanelProblem | null {
  if (status === 404) {
    return 'not-enabled';
  }
  if (status === 401 || status === 403) {
    return 'unauthorized';
  }
  if (status === 0 || status === 502 || status === 503 || status === 504) {
    return 'unavailable';
  }
  return null;
}

/** A response's body as JSON, or null (none, or an HTML error page: a route this server lacks). */
export function bodyOf(text: string): any {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/** The error of an answer other than 2xx, in the API's own words where its body has them. */
export function answerError(status: number, statusText: string, body: any): ApiError {
  const message =
    body && typeof body.message === 'string' && body.message
      ? body.message
      : `${status} ${statusText}`.trim();
  return new ApiError(message, status, body?.reason ?? null);
}
