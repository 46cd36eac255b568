import { ElasticGpuModel } from '../src/model';
import { recentJobs } from '../src/state';
import { FakeServer, FakeSocket, GPU, JOB, fakeApi, standardRoutes } from './fakes';

const INTERVAL = 3000;
const MAX = 60000;

class Page extends EventTarget {
  hidden = false;
  set(hidden: boolean): void {
    this.hidden = hidden;
    this.dispatchEvent(new Event('visibilitychange'));
  }
}

function setup(base = 'http://localhost:8888/a%40b/') {
  const server = new FakeServer(base);
  standardRoutes(server);
  const page = new Page();
  const model = new ElasticGpuModel({
    api: fakeApi(server),
    interval: INTERVAL,
    maxInterval: MAX,
    isPageHidden: () => page.hidden,
    pageEvents: page
  });
  return { server, page, model };
}

const flush = (ms = 0) => jest.advanceTimersByTimeAsync(ms);

beforeEach(() => {
  jest.useFakeTimers();
  FakeSocket.instances = [];
  FakeSocket.refuse = false;
});

afterEach(() => {
  jest.restoreAllMocks();
  jest.useRealTimers();
});

describe('polling fallback', () => {
  it('requests nothing until a view wants data', async () => {
    const { server, model } = setup();
    await flush(10 * INTERVAL);
    expect(server.requests).toHaveLength(0);
    expect(FakeSocket.instances).toHaveLength(0);
    expect(model.transport).toBe('standby');
    model.dispose();
  });

  it('polls under the base URL when the push channel is refused', async () => {
    const { server, model } = setup();
    FakeSocket.refuse = true; // e.g. a proxy without websockets
    model.acquire();
    expect(FakeSocket.last?.url).toBe('ws://localhost:8888/a%40b/elastic-gpu/api/ws?view=panel');
    await flush(10);
    expect(model.transport).toBe('poll');
    expect(model.data.version).toBe(7);
    expect(model.data.gpus).toHaveLength(2);
    expect(model.data.queue?.map(e => e.id)).toEqual(['j-1']);
    expect(model.whoami?.user).toBe('ann');
    expect(model.data.idle).toBeNull(); // a server that does not say
    server.routes.gpus = {
      body: { source: 'simulated', gpus: [GPU(0), GPU(1)], idle: '2 GPUs idle: j-5 needs 4' }
    };
    server.routes.updates = { body: { version: 8 } };
    await flush(INTERVAL);
    expect(model.data.idle).toBe('2 GPUs idle: j-5 needs 4');
    for (const r of server.requests) {
      expect(new URL(r.url).pathname.startsWith('/a%40b/elastic-gpu/api/')).toBe(true);
    }
    const before = server.count('gpus');
    await flush(INTERVAL);
    expect(server.count('gpus')).toBe(before + 1);
    model.dispose();
  });

  it('polls when the push channel stays silent', async () => {
    const { server, model } = setup();
    model.acquire();
    await flush(1000);
    expect(server.count('gpus')).toBe(0); // the socket gets its chance first
    await flush(5000);
    expect(FakeSocket.instances[0].closed).toBe(true);
    expect(server.count('gpus')).toBeGreaterThan(0);
    model.dispose();
  });

  it('backs off exponentially on errors, up to the maximum, and recovers', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0.999999); // the largest step of each backoff
    const { server, model } = setup();
    server.failWith = { status: 503, body: { message: 'scheduler down', reason: 'unavailable' } };
    FakeSocket.refuse = true;
    model.acquire();
    const times: number[] = [];
    const started = Date.now();
    let seen = 0;
    for (let t = 0; t < 400000; t += 500) {
      await flush(500);
      if (server.requests.length > seen) {
        seen = server.requests.length;
        times.push(Date.now() - started);
      }
    }
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    for (let i = 1; i < gaps.length; i++) {
      expect(gaps[i]).toBeGreaterThanOrEqual(gaps[i - 1]); // growing ...
    }
    expect(gaps[gaps.length - 1]).toBe(MAX); // ... up to the maximum
    expect(Math.max(...gaps)).toBeLessThanOrEqual(MAX);
    expect(times.length).toBeLessThan(20); // 400 s at a steady 3 s would be 133 requests
    expect(model.problem?.kind).toBe('unavailable');
    expect(model.problem?.message).toContain('scheduler down');

    server.failWith = null;
    await flush(MAX);
    expect(model.problem).toBeNull();
    expect(model.data.version).toBe(7);
    const after = server.count('gpus');
    await flush(INTERVAL);
    expect(server.count('gpus')).toBe(after + 1); // back to the normal interval
    model.dispose();
  });

  it.each([
    [404, 'not-enabled'],
    [403, 'unauthorized'],
    [401, 'unauthorized'],
    [503, 'unavailable']
  ])('a %d says %s', async (status, kind) => {
    const { server, model } = setup();
    server.failWith = { status, body: { message: 'no' } };
    model.acquire();
    FakeSocket.last!.drop();
    await flush(10);
    expect(model.problem?.kind).toBe(kind);
    expect(model.problem?.message).toBeTruthy();
    model.dispose();
  });
});

describe('standby', () => {
  it('requests nothing while the page is hidden, and catches up when shown', async () => {
    const { server, page, model } = setup();
    model.acquire();
    FakeSocket.last!.drop();
    await flush(10);
    page.set(true);
    expect(model.transport).toBe('standby');
    const before = server.requests.length;
    const sockets = FakeSocket.instances.length;
    await flush(10 * MAX);
    expect(server.requests.length).toBe(before);
    expect(FakeSocket.instances.length).toBe(sockets);

    page.set(false);
    expect(FakeSocket.instances.length).toBe(sockets + 1); // the push channel first
    FakeSocket.last!.drop();
    await flush(10);
    expect(server.requests.length).toBeGreaterThan(before);
    model.dispose();
  });

  it('requests nothing once the last view let go, and closes the socket', async () => {
    const { server, model } = setup();
    const acquired = model.acquire();
    const socket = FakeSocket.last!;
    socket.receive({
      type: 'snapshot',
      version: 1,
      gpus: { source: 'nvml', gpus: [] },
      queue: [],
      jobs: []
    });
    acquired.dispose();
    expect(socket.closed).toBe(true);
    expect(model.transport).toBe('standby');
    const before = server.requests.length;
    await flush(10 * MAX);
    expect(server.requests.length).toBe(before);
    expect(FakeSocket.instances).toHaveLength(1);
    model.dispose();
  });
});

describe('push channel', () => {
  const snapshot = {
    type: 'snapshot',
    version: 10,
    gpus: { source: 'simulated', gpus: [GPU(0, { holder: 'j-1', holder_user: 'ann' }), GPU(1)] },
    queue: { queue: [JOB('j-1', { state: 'running', gpus: ['0'] }), JOB('j-2', { position: 1 })] },
    jobs: {
      jobs: [
        JOB('j-1', { state: 'running', gpus: ['0'] }),
        JOB('j-2'),
        JOB('j-0', { state: 'done', finished_at: 5 })
      ]
    }
  };

  it('applies a snapshot, then deltas, without polling', async () => {
    const { server, model } = setup();
    model.acquire();
    const socket = FakeSocket.last!;
    socket.receive(snapshot);
    await flush(10);
    expect(model.transport).toBe('push');
    expect(model.data.version).toBe(10);
    expect(model.data.source).toBe('simulated');
    expect(model.data.queue?.map(e => e.id)).toEqual(['j-1', 'j-2']);
    expect(model.data.jobs.size).toBe(3);
    const gpus = model.data.gpus;
    const j0 = model.data.jobs.get('j-0');

    socket.receive({
      type: 'delta',
      version: 11,
      jobs: { changed: [JOB('j-2', { state: 'starting', gpus: ['1'] })] },
      queue: { changed: [JOB('j-2', { state: 'starting', gpus: ['1'] })] }
    });
    expect(model.data.version).toBe(11);
    expect(model.data.jobs.get('j-2')?.state).toBe('starting');
    expect(model.data.gpus).toBe(gpus); // untouched parts keep their identity
    expect(model.data.jobs.get('j-0')).toBe(j0);

    socket.receive({
      type: 'delta',
      version: 12,
      jobs: { changed: [JOB('j-1', { state: 'done', finished_at: 9 })], removed: ['j-0'] },
      queue: { removed: ['j-1'], changed: [JOB('j-4')] },
      gpus: { source: 'simulated', gpus: [GPU(0), GPU(1, { holder: 'j-2' })] }
    });
    expect(model.data.jobs.has('j-0')).toBe(false);
    expect(model.data.jobs.get('j-1')?.state).toBe('done');
    expect(model.data.queue?.map(e => e.id)).toEqual(['j-2', 'j-4']); // appended
    expect(model.data.gpus?.[1].holder).toBe('j-2');

    const jobs = model.data.jobs;
    socket.receive({ type: 'delta', version: 13, queue: { order: ['j-4', 'j-2'] } });
    expect(model.data.queue?.map(e => e.id)).toEqual(['j-4', 'j-2']);
    expect(model.data.jobs).toBe(jobs); // untouched

    await flush(10 * INTERVAL);
    for (const route of ['gpus', 'queue', 'jobs', 'updates']) {
      expect(server.count(route)).toBe(0);
    }
    model.dispose();
  });

  it('subscribes again when a delta does not fit what it holds', async () => {
    const { model } = setup();
    model.acquire();
    FakeSocket.last!.receive(snapshot);
    FakeSocket.last!.receive({ type: 'delta', version: 43, queue: { order: ['j-1', 'j-9'] } });
    expect(FakeSocket.instances).toHaveLength(2); // a new subscription: a new snapshot
    expect(FakeSocket.instances[0].closed).toBe(true);
    FakeSocket.last!.receive({ ...snapshot, version: 44 });
    expect(model.data.version).toBe(44);
    model.dispose();
  });

  it('falls back to polling when a live channel drops, and reconnects', async () => {
    const { server, model } = setup();
    model.acquire();
    FakeSocket.last!.receive(snapshot);
    FakeSocket.last!.drop();
    await flush(10);
    expect(model.transport).toBe('poll');
    expect(server.count('gpus')).toBe(1);
    await flush(1000);
    expect(FakeSocket.instances).toHaveLength(2);
    FakeSocket.last!.receive({ ...snapshot, version: 20 });
    expect(model.transport).toBe('push');
    const polled = server.count('gpus');
    await flush(10 * INTERVAL);
    expect(server.count('gpus')).toBe(polled);
    model.dispose();
  });

  it('fetches the documents on an update message of a server without the panel view', async () => {
    const { server, model } = setup();
    model.acquire();
    FakeSocket.last!.receive({ type: 'update', version: -1, status: { gpus: [], jobs: [] } });
    await flush(10);
    expect(server.count('queue')).toBe(1);
    expect(model.data.version).toBe(7);
    expect(model.transport).toBe('push');
    FakeSocket.last!.receive({ type: 'update', version: 7, status: { gpus: [], jobs: [] } });
    await flush(10);
    expect(server.count('queue')).toBe(1); // nothing new
    FakeSocket.last!.receive({ type: 'update', version: 8, status: { gpus: [], jobs: [] } });
    await flush(10);
    expect(server.count('queue')).toBe(2);
    model.dispose();
  });
});

describe('actions and details', () => {
  it('shows a cancel at once', async () => {
    const { server, model } = setup();
    server.routes['jobs/j-1/cancel'] = { status: 202, body: JOB('j-1', { state: 'cancelled' }) };
    model.acquire();
    FakeSocket.last!.drop();
    await flush(10);
    await model.cancel('j-1');
    expect(model.data.jobs.get('j-1')?.state).toBe('cancelled');
    expect(model.data.queue?.[0].state).toBe('cancelled');
    // listed once: in the queue until the server drops it there, then in Recent
    expect(recentJobs(model.data, 'ann', 10)).toEqual([]);
    model.dispose();
  });

  it('follows the progress of a watched job from the last record on', async () => {
    const { server, model } = setup();
    const since: (string | null)[] = [];
    server.routes['jobs/j-1/progress'] = url => {
      since.push(url.searchParams.get('since'));
      return {
        body: {
          progress: [
            { t: since.length, global_step: since.length, loss: 1 / since.length, replicas: 1 }
          ]
        }
      };
    };
    model.acquire();
    const socket = FakeSocket.last!;
    socket.receive({
      type: 'snapshot',
      version: 1,
      gpus: [],
      queue: [],
      jobs: [JOB('j-1', { state: 'running', progress: { global_step: 1 } })]
    });
    const watch = model.watchProgress('j-1');
    await flush(10);
    socket.receive({
      type: 'delta',
      version: 2,
      jobs: { changed: [JOB('j-1', { state: 'running', progress: { global_step: 2 } })] }
    });
    await flush(10);
    expect(since).toEqual([null, '1']);
    expect(model.progress('j-1').map(r => r.global_step)).toEqual([1, 2]);
    watch.dispose();
    socket.receive({
      type: 'delta',
      version: 3,
      jobs: { changed: [JOB('j-1', { state: 'running', progress: { global_step: 3 } })] }
    });
    await flush(10);
    expect(since).toHaveLength(2);
    model.dispose();
  });

  it('gives a job with its queue entry merged in, for the notebook view', async () => {
    const { model } = setup();
    model.acquire();
    FakeSocket.last!.receive({
      type: 'snapshot',
      version: 1,
      gpus: { source: 'nvml', gpus: [] },
      queue: { queue: [JOB('j-1', { name: null, estimated_start: 100, estimated_end: 200 })] },
      jobs: { jobs: [JOB('j-1', { name: 'mnist', eta_s: 5 }), JOB('j-0', { state: 'done' })] }
    });
    const job = model.job('j-1')!;
    expect([job.name, job.estimated_end, job.eta_s]).toEqual(['mnist', 200, 5]);
    expect(model.job('j-0')?.state).toBe('done');
    model.dispose();
  });

  it('samples GPU utilisation for the charts', async () => {
    const { model } = setup();
    model.acquire();
    const socket = FakeSocket.last!;
    socket.receive({
      type: 'snapshot',
      version: 1,
      gpus: [GPU(0, { utilization: 0.1 })],
      queue: [],
      jobs: []
    });
    await flush(1000);
    socket.receive({
      type: 'delta',
      version: 2,
      gpus: { source: 'nvml', gpus: [GPU(0, { utilization: 0.9 })] }
    });
    expect(model.utilisation('0').map(s => s.u)).toEqual([0.1, 0.9]);
    model.dispose();
  });
});
