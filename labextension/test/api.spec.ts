import { ApiError, problemOf } from '../src/api';
import { FakeServer, fakeApi, standardRoutes } from './fakes';

describe('URLs under a base URL', () => {
  it.each([
    ['http://localhost:8888/', 'http://localhost:8888/elastic-gpu/api/gpus'],
    ['http://localhost:8888/a%40b/', 'http://localhost:8888/a%40b/elastic-gpu/api/gpus'],
    ['http://localhost:8888/user/alice/', 'http://localhost:8888/user/alice/elastic-gpu/api/gpus']
  ])('base %s', async (base, expected) => {
    const server = new FakeServer(base);
    standardRoutes(server);
    const api = fakeApi(server);
    expect(api.url('gpus')).toBe(expected);
    await api.gpus();
    expect(server.requests).toHaveLength(1);
    // makeRequest adds a cache buster after "?"
    expect(server.requests[0].url.split('?')[0]).toBe(expected);
  });

  it('encodes job ids and keeps the base', async () => {
    const server = new FakeServer('http://h/user/alice/');
    server.routes['jobs/j-1/cancel'] = {
      status: 202,
      body: { id: 'j-1', user: 'alice', state: 'cancelled' }
    };
    const api = fakeApi(server);
    expect(api.url('jobs', 'a b', 'logs')).toBe(
      'http://h/user/alice/elastic-gpu/api/jobs/a%20b/logs'
    );
    const job = await api.cancel('j-1');
    expect(job.state).toBe('cancelled');
    expect(server.requests[0].method).toBe('POST');
    expect(server.requests[0].url.split('?')[0]).toBe(
      'http://h/user/alice/elastic-gpu/api/jobs/j-1/cancel'
    );
  });

  it('puts query arguments after the route', async () => {
    const server = new FakeServer('http://h/a%40b/');
    server.routes['jobs/j-2/logs'] = { body: { trainer: 'x', sidecar: '' } };
    const api = fakeApi(server);
    await api.logs('j-2', 50);
    const url = new URL(server.requests[0].url);
    expect(url.pathname).toBe('/a%40b/elastic-gpu/api/jobs/j-2/logs');
    expect(url.searchParams.get('tail')).toBe('50');
  });

  it.each([
    ['ws://localhost:8888/a%40b/', 'ws://localhost:8888/a%40b/elastic-gpu/api/ws?view=panel'],
    [
      'ws://localhost:8888/user/alice/',
      'ws://localhost:8888/user/alice/elastic-gpu/api/ws?view=panel'
    ]
  ])('websocket under %s', (ws, expected) => {
    const server = new FakeServer(ws.replace(/^ws/, 'http'));
    const api = fakeApi(server, { wsUrl: ws });
    expect(api.wsUrl({ view: 'panel' })).toBe(expected);
  });

  it('appends the token to the websocket URL only where the page does', () => {
    const server = new FakeServer('http://localhost:8888/user/alice/');
    const withToken = fakeApi(server, { token: 's3cr/t', appendToken: true });
    expect(withToken.wsUrl({ view: 'panel' })).toBe(
      'ws://localhost:8888/user/alice/elastic-gpu/api/ws?view=panel&token=s3cr%2Ft'
    );
    const cookie = fakeApi(server, { token: 's3cr/t', appendToken: false });
    expect(cookie.wsUrl({ view: 'panel' })).not.toContain('token');
  });

  it('sends the page token with every request', async () => {
    const server = new FakeServer();
    standardRoutes(server);
    const seen: string[] = [];
    const api = fakeApi(server, {
      token: 'abc',
      fetch: (async (req: Request) => {
        seen.push(req.headers.get('Authorization') ?? '');
        return server.fetch(req);
      }) as any
    });
    await api.whoami();
    expect(seen).toEqual(['token abc']);
  });
});

describe('errors', () => {
  it.each([
    [404, 'not-enabled'],
    [401, 'unauthorized'],
    [403, 'unauthorized'],
    [503, 'unavailable'],
    [400, null]
  ])('status %d means %s', (status, problem) => {
    expect(problemOf(status)).toBe(problem);
  });

  it("carries the server's message", async () => {
    const server = new FakeServer();
    server.failWith = {
      status: 503,
      body: { message: 'the shared scheduler at http://x cannot be reached', reason: 'unavailable' }
    };
    const api = fakeApi(server);
    const error: ApiError = await api.queue().catch(e => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error.status).toBe(503);
    expect(error.problem).toBe('unavailable');
    expect(error.reason).toBe('unavailable');
    expect(error.message).toBe('the shared scheduler at http://x cannot be reached');
  });

  it('reads an HTML 404 (no such route on this server) as not enabled', async () => {
    const api = fakeApi(new FakeServer());
    const error: ApiError = await api.gpus().catch(e => e);
    expect(error.problem).toBe('not-enabled');
  });

  it('turns a network failure into "unavailable"', async () => {
    const server = new FakeServer();
    const api = fakeApi(server, {
      fetch: (async () => {
        throw new TypeError('Failed to fetch');
      }) as any
    });
    const error: ApiError = await api.gpus().catch(e => e);
    expect(error.status).toBe(0);
    expect(error.problem).toBe('unavailable');
  });
});
