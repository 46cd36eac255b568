/**
 * A fake transport for the model's unit tests only (the browser tests use a real server): a
 * scripted `fetch` that records every request, and a WebSocket the test drives.
 */
import { ServerConnection } from '@jupyterlab/services';

import { ElasticGpuApi } from '../src/api';
import { GPU, JOB } from './fakes-data';

export { GPU, JOB };

export interface IRoute {
  status?: number;
  body?: unknown;
}

/** Answers by route (the path after the API root, without the query). */
export class FakeServer {
  constructor(readonly baseUrl = 'http://localhost:8888/') {}

  routes: Record<string, IRoute | ((url: URL) => IRoute)> = {};
  requests: { method: string; url: string }[] = [];
  /** When set, every request fails with this status. */
  failWith: IRoute | null = null;

  readonly fetch = async (input: RequestInfo, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : new Request(input, init);
    this.requests.push({ method: request.method, url: request.url });
    const url = new URL(request.url);
    const root = new URL('elastic-gpu/api/', this.baseUrl).pathname;
    const route = url.pathname.startsWith(root) ? url.pathname.slice(root.length) : url.pathname;
    const handler = this.failWith ?? this.routes[route] ?? { status: 404, body: null };
    const answer = typeof handler === 'function' ? handler(url) : handler;
    const status = answer.status ?? 200;
    const text =
      answer.body === undefined || answer.body === null ? '' : JSON.stringify(answer.body);
    // What the client reads of a response, answered without real I/O (fake timers rule).
    return {
      ok: status >= 200 && status < 300,
      status,
      statusText: status < 300 ? 'OK' : 'Error',
      text: async () => text
    } as Response;
  };

  /** Requests to `route` so far (path after the API root). */
  count(route: string): number {
    const root = new URL('elastic-gpu/api/', this.baseUrl).pathname;
    return this.requests.filter(r => new URL(r.url).pathname === root + route).length;
  }
}

export class FakeSocket {
  static instances: FakeSocket[] = [];

  static get last(): FakeSocket | undefined {
    return FakeSocket.instances[FakeSocket.instances.length - 1];
  }

  /** When set, every new socket is closed by the "server" at once (no websockets there). */
  static refuse = false;

  constructor(readonly url: string) {
    FakeSocket.instances.push(this);
    if (FakeSocket.refuse) {
      setTimeout(() => this.drop(), 0);
    }
  }

  onopen: ((ev: any) => void) | null = null;
  onmessage: ((ev: any) => void) | null = null;
  onclose: ((ev: any) => void) | null = null;
  onerror: ((ev: any) => void) | null = null;
  closed = false;

  close(): void {
    this.closed = true;
  }

  /** The server sends a message. */
  receive(message: unknown): void {
    this.onmessage?.({ data: JSON.stringify(message) });
  }

  /** The server (or the network) closes the socket. */
  drop(): void {
    this.closed = true;
    this.onclose?.({ code: 1006 });
  }
}

/** An API client whose requests go to `server` and whose sockets are FakeSockets. */
export function fakeApi(
  server: FakeServer,
  extra: Partial<ServerConnection.ISettings> = {}
): ElasticGpuApi {
  const ws = server.baseUrl.replace(/^http/, 'ws');
  const settings = ServerConnection.makeSettings({
    baseUrl: server.baseUrl,
    wsUrl: ws,
    fetch: server.fetch as any,
    WebSocket: FakeSocket as any,
    token: '',
    ...extra
  });
  return new ElasticGpuApi(settings);
}

/** A server answering every route the panel reads, with `jobs` open in the queue. */
export function standardRoutes(server: FakeServer, jobs = [JOB('j-1')], version = 7): void {
  server.routes = {
    whoami: { body: { user: 'ann', admin: false, mode: 'embedded' } },
    updates: { body: { version } },
    gpus: { body: { source: 'simulated', gpus: [GPU(0), GPU(1)] } },
    queue: { body: { queue: jobs } },
    jobs: { body: { jobs } }
  };
}
