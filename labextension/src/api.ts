/**
 * The typed client of the REST API (docs/api.md), typed by the scheduler's models (`api-types.ts`). Every URL is built from the page's
 * `ServerConnection` settings, so the panel works under any base URL (`/user/alice/`,
 * `/a%40b/`) and sends the page's token and XSRF cookie like JupyterLab's own requests.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { JobList, ProgressList, Queue, Updates } from './api-types';
import { answerError, ApiError, bodyOf } from './apierror';
import { IGpuInventory, IJob, ILogs, IProgressRecord, IQueueEntry, IWhoami } from './types';

export { ApiError, problemOf } from './apierror';

/** Where the API lives under the server's base URL. */
export const API_PATH = 'elastic-gpu/api';

export class ElasticGpuApi {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  /** The URL of an API route; `parts` are path segments, each encoded. */
  url(...parts: string[]): string {
    return URLExt.join(this.settings.baseUrl, API_PATH, ...parts.map(encodeURIComponent));
  }

  /** The websocket URL (`ws?view=panel`), with the token where the page appends it. */
  wsUrl(query: Record<string, string> = {}): string {
    const params: Record<string, string> = { ...query };
    if (this.settings.appendToken && this.settings.token) {
      params.token = this.settings.token;
    }
    const url = URLExt.join(this.settings.wsUrl, API_PATH, 'ws');
    return url + URLExt.objectToQueryString(params);
  }

  whoami(): Promise<IWhoami> {
    return this.request('GET', ['whoami']);
  }

  gpus(): Promise<IGpuInventory> {
    return this.request('GET', ['gpus']);
  }

  /** The scheduler's state version now (a long poll that answers at once). */
  updates(): Promise<Updates> {
    return this.request('GET', ['updates'], { since: '-1', timeout: '0' });
  }

  async queue(): Promise<IQueueEntry[]> {
    return (await this.request<Queue>('GET', ['queue'])).queue;
  }

  async jobs(): Promise<IJob[]> {
    return (await this.request<JobList>('GET', ['jobs'])).jobs;
  }

  job(id: string): Promise<IJob> {
    return this.request('GET', ['jobs', id]);
  }

  cancel(id: string): Promise<IJob> {
    return this.request('POST', ['jobs', id, 'cancel']);
  }

  /** Checkpoint and stop, then hold: no GPUs until ``resume``. */
  suspend(id: string): Promise<IJob> {
    return this.request('POST', ['jobs', id, 'suspend']);
  }

  resume(id: string): Promise<IJob> {
    return this.request('POST', ['jobs', id, 'resume']);
  }

  logs(id: string, tail: number): Promise<ILogs> {
    return this.request('GET', ['jobs', id, 'logs'], { tail: String(tail) });
  }

  async progress(id: string, since?: number): Promise<IProgressRecord[]> {
    const query: Record<string, string> = since === undefined ? {} : { since: String(since) };
    const answer = await this.request<ProgressList>('GET', ['jobs', id, 'progress'], query);
    return answer.progress;
  }

  /** Open the push channel; the caller owns the socket. */
  connect(query: Record<string, string>): WebSocket {
    return new this.settings.WebSocket(this.wsUrl(query));
  }

  private async request<T>(
    method: 'GET' | 'POST',
    parts: string[],
    query: Record<string, string> = {}
  ): Promise<T> {
    const url = this.url(...parts) + URLExt.objectToQueryString(query);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, { method }, this.settings);
    } catch (error) {
      throw new ApiError('The Jupyter server cannot be reached: check that it still runs.', 0);
    }
    const body = bodyOf(await response.text());
    if (!response.ok) {
      throw answerError(response.status, response.statusText, body);
    }
    return body as T;
  }
}
