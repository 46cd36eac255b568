/**
 * @jest-environment jsdom
 *
 * The DOM contract of docs/sidebar.md, rendered from a model fed by a scripted transport.
 */
import { Widget } from '@lumino/widgets';

import { ApiError } from '../src/api';
import { lossChart, resizeMarks } from '../src/chart';
import { JobCard } from '../src/jobcard';
import { GpuTile, migText, sliceHolderText } from '../src/gpuview';
import { ElasticGpuModel } from '../src/model';
import { QueuePanel } from '../src/panel';
import { JOB_MIME_TYPE, JobRenderer } from '../src/renderer';
import { GPU, JOB } from './fakes-data';

jest.mock('../src/icon', () => ({ gpuIcon: undefined }));

/** The API as the model calls it; sockets are recorded for the test to drive. */
function scriptedApi(fail?: { status: number; message: string }) {
  const sockets: any[] = [];
  const answer = (value: unknown) =>
    fail
      ? Promise.reject(Object.assign(new Error(fail.message), { status: fail.status }))
      : Promise.resolve(value);
  const api = {
    sockets,
    connect: () => {
      const socket: any = { close: () => undefined };
      sockets.push(socket);
      return socket;
    },
    whoami: () => answer({ user: 'ann', admin: false, mode: 'embedded' }),
    updates: () => answer({ version: 1 }),
    gpus: () => answer({ source: 'simulated', gpus: [] }),
    queue: () => answer([]),
    jobs: () => answer([]),
    cancel: jest.fn(),
    job: (id: string) => answer(JOB(id, { state: 'done' })),
    progress: () => answer([])
  };
  return api;
}

function send(api: ReturnType<typeof scriptedApi>, message: unknown) {
  api.sockets[api.sockets.length - 1].onmessage({ data: JSON.stringify(message) });
}

const actions = { run: jest.fn(() => Promise.resolve()), canOpenNotebook: true };

function mount(api: ReturnType<typeof scriptedApi>) {
  const model = new ElasticGpuModel({ api: api as any, isPageHidden: () => false });
  const panel = new QueuePanel(model, actions);
  Widget.attach(panel, document.body);
  return { model, panel };
}

const flush = () => new Promise(resolve => setTimeout(resolve, 0));

afterEach(() => {
  document.body.innerHTML = '';
  actions.run.mockClear();
});

const snapshot = {
  type: 'snapshot',
  version: 5,
  gpus: {
    source: 'simulated',
    gpus: [
      GPU(0, { holder: 'j-1', holder_user: 'ann', holder_name: 'mnist' }),
      GPU(1, { name: 'NVIDIA A100-SXM4-80GB', kind: 'A100-SXM4-80GB' }),
      GPU(2, {
        external_processes: [{ pid: 7, user: 'bob', memory_mb: 100, command: null }],
        healthy: false
      })
    ]
  },
  queue: [
    JOB('j-1', { name: 'mnist', state: 'running', gpus: ['0'], position: null, started_at: 1 }),
    JOB('j-2', { name: null, user: 'bob', state: 'queued', position: 1, reason: 'queued' }),
    JOB('j-3', { state: 'queued', position: 2, estimated_start: 2e9 })
  ],
  jobs: [
    JOB('j-1', {
      name: 'mnist',
      state: 'running',
      gpus: ['0'],
      notebook: 'work/train.ipynb',
      started_at: 1
    }),
    { id: 'j-2', user: 'bob', state: 'queued', gpus: [], min_gpus: 1, max_gpus: 1, position: 1 },
    JOB('j-3', { state: 'queued', position: 2 }),
    JOB('j-0', { name: 'old', state: 'done', finished_at: 10 })
  ]
};

describe('the panel', () => {
  it('is the Lumino widget elastic-gpu-queue', () => {
    const { panel } = mount(scriptedApi());
    expect(panel.id).toBe('elastic-gpu-queue');
    expect(document.getElementById('elastic-gpu-queue')).toBe(panel.node);
    panel.dispose();
  });

  it('renders GPUs and jobs with the contract attributes', async () => {
    const api = scriptedApi();
    const { panel, model } = mount(api);
    send(api, snapshot);
    await flush();
    panel.render();
    const root = panel.node;
    expect(root.dataset.version).toBe('5');
    expect(Number(root.dataset.renderMs)).toBeGreaterThanOrEqual(0);
    const gpus = [...root.querySelectorAll<HTMLElement>('[data-gpu-index]')];
    expect(gpus.map(g => [g.dataset.gpuIndex, g.dataset.gpuState])).toEqual([
      ['0', 'held'],
      ['1', 'free'],
      ['2', 'busy']
    ]);
    expect(gpus[0].textContent).toContain('mnist (you)');
    expect(gpus[1].textContent).toContain('50 %');
    expect(gpus[1].textContent).toContain('1.0 GiB / 16.0 GiB');
    // each GPU names its kind (a lab's GPUs are rarely all alike); the full name on hover
    expect(gpus.map(g => g.dataset.gpuKind)).toEqual(['simulated', 'A100-SXM4-80GB', 'simulated']);
    expect(gpus[1].querySelector('.jp-ElasticGpu-gpuModel')?.textContent).toBe('A100-SXM4-80GB');
    expect(gpus[1].title).toContain('NVIDIA A100-SXM4-80GB');
    expect(gpus[0].querySelector('.jp-ElasticGpu-gpuModel')?.textContent).toBe('Simulated GPU');
    expect(gpus.map(g => g.dataset.gpuMig ?? null)).toEqual([null, null, null]);
    expect(gpus[1].querySelector('svg.jp-ElasticGpu-sparkline polyline')).not.toBeNull();
    expect(gpus[2].textContent).toContain('bob');
    expect(root.querySelector('[data-badge="simulated"]')).not.toBeNull();

    const queue = [...root.querySelectorAll('.jp-ElasticGpu-jobs')[0].children] as HTMLElement[];
    expect(queue.map(j => [j.dataset.jobId, j.dataset.jobState])).toEqual([
      ['j-1', 'running'],
      ['j-2', 'queued'],
      ['j-3', 'queued']
    ]);
    const mine = root.querySelector('[data-job-id="j-1"]')!;
    expect(mine.querySelector('[data-action="cancel"]')).not.toBeNull();
    expect(mine.querySelector('[data-action="logs"]')).not.toBeNull();
    expect(mine.querySelector('[data-action="open-notebook"]')).not.toBeNull();
    const theirs = root.querySelector('[data-job-id="j-2"]')!;
    expect(theirs.querySelector('[data-action]')).toBeNull(); // not mine, not admin
    expect(theirs.textContent).toContain('a job of bob');
    expect(root.querySelector('[data-job-id="j-3"]')!.textContent).toContain('Starts about');
    // Recent: finished jobs of the caller
    const recent = root.querySelector('.jp-ElasticGpu-recent')!;
    expect(recent.querySelector('[data-job-id="j-0"]')?.getAttribute('data-job-state')).toBe(
      'done'
    );
    expect((recent as HTMLDetailsElement).open).toBe(false);

    (mine.querySelector('[data-action="cancel"]') as HTMLElement).click();
    expect(actions.run).toHaveBeenCalledWith('cancel', expect.objectContaining({ id: 'j-1' }));
    panel.dispose();
    model.dispose();
  });

  it('redraws only the job a delta changed', async () => {
    const api = scriptedApi();
    const { panel, model } = mount(api);
    send(api, snapshot);
    await flush();
    panel.render();
    const before = panel.node.querySelector('[data-job-id="j-3"]')!.firstChild;
    send(api, {
      type: 'delta',
      version: 6,
      jobs: { changed: [JOB('j-1', { name: 'mnist', state: 'stopping', gpus: ['0'] })] },
      queue: { changed: [JOB('j-1', { name: 'mnist', state: 'stopping', gpus: ['0'] })] }
    });
    panel.render();
    expect(panel.node.dataset.version).toBe('6');
    expect(panel.node.querySelector('[data-job-id="j-1"]')!.getAttribute('data-job-state')).toBe(
      'stopping'
    );
    expect(panel.node.querySelector('[data-job-id="j-3"]')!.firstChild).toBe(before);
    panel.dispose();
    model.dispose();
  });

  it('says when there are no GPUs', async () => {
    const api = scriptedApi();
    const { panel, model } = mount(api);
    send(api, { ...snapshot, gpus: { source: 'nvml', gpus: [] } });
    panel.render();
    const message = panel.node.querySelector('[data-panel-message]') as HTMLElement;
    expect(message.dataset.panelMessage).toBe('no-gpus');
    expect(message.textContent).toMatch(/No GPUs/);
    panel.dispose();
    model.dispose();
  });

  it('says under the GPUs why some stay idle, and nothing once none is', async () => {
    const api = scriptedApi();
    const { panel, model } = mount(api);
    const why = '2 GPUs idle: growing j-3 to 4 would save ~5 s, a resize costs ~8 s';
    send(api, { ...snapshot, gpus: { ...snapshot.gpus, idle: why } });
    panel.render();
    const line = () => panel.node.querySelector<HTMLElement>('[data-idle-reason]');
    expect(line()!.textContent).toBe(why);
    expect(line()!.dataset.idleReason).toBe(why);
    // Under the grid, inside the GPU section (collapsing the section hides it too).
    expect(line()!.previousElementSibling!.classList).toContain('jp-ElasticGpu-gpus');
    // Only the reason changed: the GPUs keep their nodes, the line follows.
    const tile = panel.node.querySelector('[data-gpu-index="1"]');
    const other = 'no job can use more';
    send(api, {
      type: 'delta',
      version: 6,
      gpus: { ...snapshot.gpus, idle: `1 GPU idle: ${other}` }
    });
    panel.render();
    expect(line()!.textContent).toBe(`1 GPU idle: ${other}`);
    expect(panel.node.querySelector('[data-gpu-index="1"]')).toBe(tile);
    // A delta without `gpus` leaves the reason as it was.
    send(api, { type: 'delta', version: 7 });
    panel.render();
    expect(line()!.textContent).toBe(`1 GPU idle: ${other}`);
    send(api, { type: 'delta', version: 8, gpus: { ...snapshot.gpus, idle: null } });
    panel.render();
    expect(line()).toBeNull();
    panel.dispose();
    model.dispose();
  });

  it('shows no idle line for a server that does not say (an older one)', async () => {
    const api = scriptedApi();
    const { panel, model } = mount(api);
    send(api, snapshot);
    panel.render();
    expect(panel.node.querySelector('[data-gpu-index]')).not.toBeNull();
    expect(panel.node.querySelector('[data-idle-reason]')).toBeNull();
    panel.dispose();
    model.dispose();
  });

  it.each([
    [404, 'not-enabled', /not enabled/],
    [503, 'unavailable', /shared scheduler is down/],
    [403, 'unauthorized', /not signed in/]
  ])('a %d shows the %s message, never a blank panel', async (status, kind, text) => {
    const api = scriptedApi();
    const error = new ApiError('the shared scheduler is down', status);
    api.whoami = () => Promise.reject(error);
    const { panel, model } = mount(api);
    api.sockets[0].onclose(); // no push channel here
    await flush();
    await flush();
    panel.render();
    const message = panel.node.querySelector('[data-panel-message]') as HTMLElement;
    expect(message.dataset.panelMessage).toBe(kind);
    expect(message.textContent).toMatch(text);
    expect(panel.node.querySelector('[data-job-id]')).toBeNull();
    panel.dispose();
    model.dispose();
  });
});

describe('the job card', () => {
  const records = [
    { t: 1, global_step: 0, loss: 2.0, replicas: 4 },
    { t: 2, global_step: 100, loss: 1.0, replicas: 4 },
    { t: 3, global_step: 150, loss: 0.8, replicas: 2 },
    { t: 4, global_step: 300, loss: 0.5, replicas: 2 }
  ];

  it('marks resizes where the GPU count changed', () => {
    expect(resizeMarks(records)).toEqual([{ step: 150, from: 4, to: 2 }]);
  });

  it('draws the loss with axes, labels and the resize', () => {
    const chart = lossChart(records)!;
    const texts = [...chart.querySelectorAll('text')].map(t => t.textContent);
    expect(texts).toContain('step');
    expect(texts).toContain('loss');
    expect(texts).toContain('4\u21922');
    expect(chart.querySelectorAll('.jp-ElasticGpu-resizeMark')).toHaveLength(1);
    expect(
      chart.querySelector('.jp-ElasticGpu-lossLine')!.getAttribute('points')!.split(' ')
    ).toHaveLength(4);
  });

  it('shows the full view in a notebook, the same component as the sidebar', () => {
    const card = new JobCard({ detail: 'full', onAction: jest.fn() });
    card.update(
      JOB('j-9', {
        name: 'mnist',
        state: 'running',
        progress: { epoch: 4, epochs: 20, fraction: 0.2, loss: 0.5 },
        history: [
          { t: 1, gpus: ['0', '1', '2', '3'], why: 'admitted' },
          { t: 2, gpus: ['0', '1'], why: 'a shorter job arrived' }
        ],
        resizes: 1
      }) as any,
      {
        me: { user: 'ann', admin: false, mode: 'embedded' as const },
        canOpenNotebook: false,
        progress: records,
        now: 3000
      }
    );
    expect(card.node.dataset.jobId).toBe('j-9');
    expect(card.node.textContent).toContain('epoch 5/20');
    expect(card.node.textContent).toContain(
      'resized from 4 to 2 GPUs (0, 1): a shorter job arrived'
    );
    expect(card.node.querySelector('svg.jp-ElasticGpu-lossChart')).not.toBeNull();
    expect(card.node.querySelector('[data-action="open-notebook"]')).toBeNull();
  });

  it('never shows an epoch above the total', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    const me = { user: 'ann', admin: false, mode: 'embedded' as const };
    card.update(JOB('j', { state: 'done', progress: { epoch: 398, epochs: 128 } }) as any, {
      me,
      canOpenNotebook: false,
      now: 0
    });
    expect(card.node.textContent).toContain('epoch 128/128');
  });
});

describe('the notebook job view', () => {
  it('renders the job card from the shared model while it is shown', async () => {
    const api = scriptedApi();
    const model = new ElasticGpuModel({ api: api as any, isPageHidden: () => false });
    const renderer = new JobRenderer(model, actions);
    await renderer.renderModel({ data: { [JOB_MIME_TYPE]: { job_id: 'j-1' } } } as any);
    expect(model.active).toBe(false); // not on screen yet
    Widget.attach(renderer, document.body);
    expect(model.active).toBe(true);
    expect(renderer.node.textContent).toContain('Loading job j-1');
    send(api, snapshot);
    await flush();
    const card = renderer.node.querySelector('[data-job-id="j-1"]') as HTMLElement;
    expect(card.dataset.jobState).toBe('running');
    expect(card.querySelector('[data-action="open-notebook"]')).toBeNull(); // it is open
    renderer.hide();
    expect(model.active).toBe(false);
    renderer.show();
    expect(model.active).toBe(true);
    // A job no list carries any more is fetched once, by id.
    const old = new JobRenderer(model, actions);
    await old.renderModel({ data: { [JOB_MIME_TYPE]: { job_id: 'j-old' } } } as any);
    Widget.attach(old, document.body);
    await flush();
    expect(old.node.querySelector('[data-job-id="j-old"]')?.getAttribute('data-job-state')).toBe(
      'done'
    );
    old.dispose();
    renderer.dispose();
    expect(model.active).toBe(false);
    model.dispose();
  });

  it('names no job for data without a job id', async () => {
    const model = new ElasticGpuModel({ api: scriptedApi() as any, isPageHidden: () => false });
    const renderer = new JobRenderer(model, actions);
    await renderer.renderModel({ data: { [JOB_MIME_TYPE]: { job_id: '../etc' } } } as any);
    expect(renderer.node.textContent).toContain('names no job');
    renderer.dispose();
    model.dispose();
  });
});

describe('a GPU in MIG mode', () => {
  const slice = (profile: string, uuid: string) => ({
    uuid,
    profile,
    memory_total_mb: 9984,
    memory_used_mb: 0
  });

  it('lists its instances by profile, and nothing for a GPU without MIG', () => {
    const mig = [slice('3g.40gb', 'MIG-1'), slice('1g.10gb', 'MIG-2'), slice('1g.10gb', 'MIG-3')];
    expect(migText(GPU(0, { mig }))).toBe('MIG: 3g.40gb, 2 \u00d7 1g.10gb');
    expect(migText(GPU(0, { mig: [] }))).toBe('MIG: no instances');
    expect(migText(GPU(0))).toBeNull();
  });

  it('shows each slice under its GPU with who holds it, and says utilisation is not reported', () => {
    const me = { user: 'alice', admin: false } as any;
    const mine = { ...slice('1g.10gb', 'MIG-a'), holder: 'j-1', holder_user: 'alice' };
    const named = { ...mine, holder_name: 'kernel-1a2b' };
    const theirs = { ...slice('1g.10gb', 'MIG-b'), holder: 'j-2', holder_user: 'bob' };
    const free = slice('3g.40gb', 'MIG-c');
    expect(sliceHolderText(named, me)).toBe('kernel-1a2b (you)');
    expect(sliceHolderText(mine, me)).toBe('yours (j-1)');
    expect(sliceHolderText(theirs, me)).toBe('held by bob');
    expect(sliceHolderText(free, me)).toBe('free');

    const tile = new GpuTile();
    tile.update(GPU(0, { mig: [named, theirs, free], utilization: null }), [], 60000, 0, me);
    const rows = [...tile.node.querySelectorAll<HTMLElement>('[data-slice-uuid]')];
    expect(rows.map(r => [r.dataset.sliceProfile, r.dataset.sliceState])).toEqual([
      ['1g.10gb', 'held'],
      ['1g.10gb', 'held'],
      ['3g.40gb', 'free']
    ]);
    expect(rows.map(r => r.querySelector('.jp-ElasticGpu-sliceHolder')?.textContent)).toEqual([
      'kernel-1a2b (you)',
      'held by bob',
      'free'
    ]);
    expect(tile.node.querySelector('.jp-ElasticGpu-gpuUtil')?.textContent).toBe(
      'utilisation not reported (MIG)'
    );
    tile.update(GPU(1, { utilization: null }), [], 60000, 0, me);
    expect(tile.node.querySelector('[data-slice-uuid]')).toBeNull();
    expect(tile.node.querySelector('.jp-ElasticGpu-gpuUtil')).toBeNull();
  });

  it("shows each slice's utilisation where NVML reports it (GPM), and then no 'not reported'", () => {
    const me = { user: 'alice', admin: false } as any;
    const busy = { ...slice('1g.10gb', 'MIG-a'), utilization: 0.425 };
    const idle = { ...slice('1g.10gb', 'MIG-b'), utilization: 0 };
    const tile = new GpuTile();
    tile.update(GPU(0, { mig: [busy, idle], utilization: null }), [], 60000, 0, me);
    const util = [...tile.node.querySelectorAll('[data-slice-uuid]')].map(
      r => r.querySelector('.jp-ElasticGpu-sliceUtil')?.textContent
    );
    expect(util).toEqual(['43 %', '0 %']);
    expect(tile.node.querySelector('.jp-ElasticGpu-gpuUtil')).toBeNull();
  });
});
