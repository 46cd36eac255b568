/**
 * The admin page's client of the REST API. The page has no JupyterLab around it: it sends the
 * `?token=` it was opened with (the shared scheduler has no login cookie) and, on every
 * request that changes something, Jupyter's XSRF header, as a cookie-authenticated request
 * must.
 */
import { answerError, ApiError, bodyOf } from '../apierror';
import { IGpuInventory, IJob, IShares } from '../types';

export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export interface IAdminClientOptions {
  /** The API's root URL, ending in `/` (the page's config). */
  api: string;
  /** The token of the page's address, or null when a cookie logs in. */
  token: string | null;
  /** The XSRF token the server put in the page, used when the `_xsrf` cookie is absent. */
  xsrf: string | null;
  /** The page's cookies (`document.cookie`), read at each request. */
  cookies: () => string;
  fetch: Fetch;
}

type Method = 'GET' | 'POST' | 'PUT';

export class AdminClient {
  constructor(private readonly options: IAdminClientOptions) {}

  async gpus(): Promise<IGpuInventory> {
    return this.request('GET', 'gpus');
  }

  async jobs(): Promise<IJob[]> {
    return (await this.request<{ jobs: IJob[] }>('GET', 'jobs')).jobs;
  }

  shares(): Promise<IShares> {
    return this.request('GET', 'admin/shares');
  }

  /** A long poll: answers when the state's version passes `since`, or after `timeout` s. */
  updates(since: number, timeout: number): Promise<{ version: number }> {
    return this.request('GET', `updates?since=${since}&timeout=${timeout}`);
  }

  drain(gpu: string, drained: boolean): Promise<unknown> {
    return this.request('POST', `gpus/${encodeURIComponent(gpu)}/drain`, { drained });
  }

  /** `suspend`, `resume` or `cancel` a job. */
  steer(job: string, action: 'suspend' | 'resume' | 'cancel'): Promise<IJob> {
    return this.request('POST', `jobs/${encodeURIComponent(job)}/${action}`, {});
  }

  setPriority(job: string, priority: number): Promise<IJob> {
    return this.request('POST', `jobs/${encodeURIComponent(job)}/priority`, { priority });
  }

  setWeight(group: string, weight: number): Promise<unknown> {
    return this.request('PUT', `admin/groups/${encodeURIComponent(group)}/weight`, { weight });
  }

  private async request<T>(method: Method, path: string, body?: unknown): Promise<T> {
    const { api, token, xsrf, fetch } = this.options;
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (token) {
      headers.Authorization = `token ${token}`;
    }
    if (method !== 'GET') {
      const found = this.cookie('_xsrf') ?? xsrf;
      if (found) {
        headers['X-XSRFToken'] = found;
      }
    }
    let response: Response;
    try {
      response = await fetch(api + path, {
        method,
        headers,
        credentials: 'same-origin',
        body: body === undefined ? undefined : JSON.stringify(body)
      });
    } catch {
      throw new ApiError('The scheduler cannot be reached: check that it still runs.', 0);
    }
    const doc = bodyOf(await response.text());
    if (!response.ok) {
      throw answerError(response.status, response.statusText, doc);
    }
    return doc as T;
  }

  private cookie(name: string): string | null {
    const found = this.options
      .cookies()
      .split('; ')
      .find(c => c.startsWith(name + '='));
    return found ? decodeURIComponent(found.slice(name.length + 1)) : null;
  }
}
