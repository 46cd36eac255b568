/**
 * @jest-environment jsdom
 *
 * The admin page (src/admin/) on its own document (admin.html), drawn from typed fixtures,
 * its actions' requests recorded by a scripted fetch.
 */
import { readFileSync } from 'fs';
import { join } from 'path';

import { AdminClient } from '../src/admin/client';
import { AdminPage } from '../src/admin/page';
import { fill, gpuRow, IAdminSteering, jobRow, NONE, sortJobs } from '../src/admin/render';
import { GPUS, INVENTORY, JOBS, SHARES } from './admin-fixtures';
import { reasonAfterState } from '../src/reasons';

const API = '/user/someone/elastic-gpu/api/';
const HTML = join(__dirname, '../../jupyter_elastic_gpu/server/static/admin/admin.html');

interface IRecorded {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

interface IAnswer {
  status?: number;
  body?: unknown;
}

type Route = IAnswer | (() => IAnswer);

/** A scripted server: answers by `METHOD path` (the path under the API), records requests. */
class Scripted {
  requests: IRecorded[] = [];
  answers: Record<string, Route> = {
    'GET gpus': { body: INVENTORY },
    'GET jobs': { body: { jobs: JOBS, hidden: 0 } },
    'GET admin/shares': { body: SHARES }
  };

  readonly fetch = async (url: string, init: RequestInit): Promise<Response> => {
    const method = init.method ?? 'GET';
    const path = url.slice(API.length);
    this.requests.push({
      method,
      url,
      headers: init.headers as Record<string, string>,
      body: init.body ? JSON.parse(init.body as string) : undefined
    });
    const route = this.answers[`${method} ${path.split('?')[0]}`] ?? { status: 200, body: {} };
    const answer = typeof route === 'function' ? route() : route;
    const status = answer.status ?? 200;
    return {
      ok: status < 300,
      status,
      statusText: status < 300 ? 'OK' : 'Refused',
      text: async () => JSON.stringify(answer.body ?? null)
    } as Response;
  };

  /** The requests that change something (the reads of each redraw left out). */
  get changes(): IRecorded[] {
    return this.requests.filter(r => r.method !== 'GET');
  }
}

function setUp(options: { token?: string | null; confirm?: boolean } = {}) {
  document.documentElement.innerHTML = readFileSync(HTML, 'utf-8')
    .replace(/<script>\$script<\/script>/, '')
    .replace('$style', '')
    .replace('$config', '{}');
  document.cookie = '_xsrf=cookie-xsrf';
  const server = new Scripted();
  const confirms: string[] = [];
  const client = new AdminClient({
    api: API,
    token: options.token ?? null,
    xsrf: 'page-xsrf',
    cookies: () => document.cookie,
    fetch: server.fetch
  });
  const page = new AdminPage(document, client, {
    confirm: text => {
      confirms.push(text);
      return options.confirm ?? true;
    },
    wait: async () => {
      page.stopped = true;
    }
  });
  return { server, page, confirms };
}

const rows = (table: string) => [
  ...document.querySelectorAll<HTMLTableRowElement>(`#${table} tbody tr`)
];
const cells = (row: Element) => [...row.querySelectorAll('td')].map(td => td.textContent);
const row = (selector: string) => document.querySelector<HTMLTableRowElement>(selector)!;
const button = (scope: Element, action: string) =>
  scope.querySelector<HTMLButtonElement>(`button[data-action="${action}"]`)!;

/** A steering that records what the rows ask for. */
function recorder() {
  const asked: string[] = [];
  const record =
    (what: string) =>
    async (...args: unknown[]) => {
      asked.push(`${what} ${args.map(a => (typeof a === 'object' ? (a as any).id : a)).join(' ')}`);
    };
  const steer: IAdminSteering = {
    drain: record('drain'),
    suspend: record('suspend'),
    resume: record('resume'),
    cancel: record('cancel'),
    setPriority: record('priority'),
    setWeight: record('weight')
  };
  return { asked, steer };
}

describe('the admin page draws', () => {
  it('every GPU with its holder, use, memory and state', async () => {
    const { page } = setUp();
    await page.refresh();
    expect(rows('gpus').map(r => r.dataset.gpuId)).toEqual(['0', '1', '2', '3', '4']);
    expect(cells(row('#gpus tr[data-gpu-id="0"]'))).toEqual([
      '0',
      'Simulated GPU',
      'ann: bert',
      '50 %',
      '512 MiB / 16.0 GiB',
      'in use',
      'Drain'
    ]);
    const state = (id: string) => row(`#gpus tr[data-gpu-id="${id}"] td.state`).textContent;
    expect(['1', '2', '3', '4'].map(state)).toEqual([
      'free',
      'draining',
      'drained',
      'busy (eve, unknown)'
    ]);
    expect(cells(row('#gpus tr[data-gpu-id="1"]')).slice(2, 5)).toEqual([NONE, NONE, NONE]);
    expect(button(row('#gpus tr[data-gpu-id="3"]'), 'undrain')).not.toBeNull();
  });

  it('a GPU in MIG mode with each instance and who holds it', () => {
    const slice = (uuid: string, profile: string, holder?: [string, string, string | null]) => ({
      uuid,
      profile,
      memory_total_mb: 9984,
      memory_used_mb: null,
      holder: holder?.[0] ?? null,
      holder_user: holder?.[1] ?? null,
      holder_name: holder?.[2] ?? null
    });
    const mig = [
      slice('MIG-a', '1g.10gb', ['j-1', 'ann', 'kernel-1a2b']),
      slice('MIG-b', '1g.10gb', ['j-2', 'bob', null]),
      slice('MIG-c', '3g.40gb')
    ];
    const steer = {} as IAdminSteering;
    const tr = gpuRow({ ...GPUS[1], name: 'NVIDIA H100 80GB HBM3', mig }, steer);
    const lines = [...tr.querySelectorAll<HTMLElement>('[data-slice-uuid]')];
    expect(lines.map(l => l.textContent)).toEqual([
      '1g.10gb: ann: kernel-1a2b',
      '1g.10gb: bob: j-2',
      '3g.40gb: free'
    ]);
    expect(cells(tr)[3]).toBe('not reported (MIG)');

    const sampled = mig.map((s, i) => ({ ...s, utilization: [0.5, 0, null][i] }));
    const row = gpuRow({ ...GPUS[1], name: 'NVIDIA H100 80GB HBM3', mig: sampled }, steer);
    expect([...row.querySelectorAll('[data-slice-uuid]')].map(l => l.textContent)).toEqual([
      '1g.10gb: ann: kernel-1a2b (50 %)',
      '1g.10gb: bob: j-2 (0 %)',
      '3g.40gb: free'
    ]);
    expect(cells(row)[3]).toBe('per slice (MIG)');
  });

  it('open jobs first, oldest first, then the finished ones, latest first', async () => {
    const { page } = setUp();
    await page.refresh();
    expect(rows('jobs').map(r => r.dataset.jobId)).toEqual(['j-held', 'j-run', 'j-new', 'j-old']);
    expect(sortJobs(JOBS).map(j => j.id)).toEqual(['j-held', 'j-run', 'j-new', 'j-old']);
    const running = row('#jobs tr[data-job-id="j-run"]');
    expect(running.dataset.state).toBe('running');
    expect(cells(running).slice(0, 5)).toEqual([
      'j-run',
      'ann',
      'bert',
      'running',
      '0, 2 (1–4 GPUs)'
    ]);
    // The reason without the state it opens with, which the state column says already.
    expect(running.querySelector('td.reason')!.textContent).toBe(
      reasonAfterState('running', 'running', { gpus: 2 })
    );
    expect(running.querySelector('td.reason')!.textContent).not.toMatch(/^running/);
    const held = row('#jobs tr[data-job-id="j-held"]');
    expect(held.querySelector('td.state')!.textContent).toBe('queued held');
    expect(cells(held)[4]).toBe('none (2 GPUs)');
    expect(held.querySelector<HTMLInputElement>('input[data-key="priority-j-held"]')!.value).toBe(
      '2'
    );
  });

  it('the buttons each state allows', async () => {
    const { page } = setUp();
    await page.refresh();
    const actions = (id: string) =>
      [...row(`#jobs tr[data-job-id="${id}"]`).querySelectorAll('button')].map(
        b => b.dataset.action
      );
    expect(actions('j-run')).toEqual(['priority', 'suspend', 'cancel']);
    expect(actions('j-held')).toEqual(['priority', 'resume', 'cancel']);
    expect(actions('j-old')).toEqual([]);
    expect(cells(row('#jobs tr[data-job-id="j-old"]'))[5]).toBe('1.5');
    const stopping = jobRow({ ...JOBS[1], state: 'stopping' }, recorder().steer);
    expect([...stopping.querySelectorAll('button')].map(b => b.dataset.action)).toEqual([
      'priority',
      'cancel'
    ]);
  });

  it('usage against share, per user and per group', async () => {
    const { page } = setUp();
    await page.refresh();
    expect(document.getElementById('shares')!.hidden).toBe(false);
    expect(document.getElementById('shares-note')!.textContent).toBe(
      '4 usable GPUs; usage decays with a half-life of 7 days.'
    );
    expect(cells(row('#share-users tr[data-user="bob"]'))).toEqual([
      'bob',
      NONE,
      '1',
      '33 %',
      '1',
      '0',
      '75 %',
      '2.25×'
    ]);
    const group = row('#share-groups tr[data-group="deep lab"]');
    expect(cells(group)).toEqual(['deep lab', ' Set', 'ann', '2', '25 %']);
    expect(group.querySelector<HTMLInputElement>('input')!.value).toBe('2');
  });

  it('why usage against share is not shown', async () => {
    const { server, page } = setUp();
    server.answers['GET admin/shares'] = { status: 404, body: { message: 'no fair share' } };
    await page.refresh();
    expect(document.getElementById('shares')!.hidden).toBe(true);
    expect(document.getElementById('shares-note')!.textContent).toBe(
      'Fair share is not available on this scheduler.'
    );
    server.answers['GET admin/shares'] = { status: 500, body: { message: 'the store is locked' } };
    await page.refresh();
    expect(document.getElementById('shares-note')!.textContent).toBe(
      'Usage against share cannot be shown: the store is locked'
    );
  });

  it('a row that says so where a table is empty', async () => {
    const { server, page } = setUp();
    server.answers['GET jobs'] = { body: { jobs: [], hidden: 0 } };
    await page.refresh();
    expect(rows('jobs').map(cells)).toEqual([['no jobs']]);
    expect(row('#jobs td.empty').getAttribute('colspan')).toBe('8');
  });

  it('a redraw keeps what is being typed into a field', () => {
    setUp();
    const { steer } = recorder();
    const table = document.getElementById('jobs') as HTMLTableElement;
    fill(table, [jobRow(JOBS[1], steer)], 8, 'no jobs');
    const input = table.querySelector<HTMLInputElement>('input[data-key="priority-j-run"]')!;
    input.focus();
    input.value = '7';
    fill(table, [jobRow(JOBS[1], steer)], 8, 'no jobs');
    const again = table.querySelector<HTMLInputElement>('input[data-key="priority-j-run"]')!;
    expect(again).not.toBe(input);
    expect(again.value).toBe('7');
    expect(document.activeElement).toBe(again);
  });

  it('a redraw waits while a button is pressed, so the click is not lost', async () => {
    setUp();
    const { asked, steer } = recorder();
    const table = document.getElementById('jobs') as HTMLTableElement;
    fill(table, [jobRow(JOBS[1], steer)], 8, 'no jobs');
    const cancel = button(table, 'cancel');
    cancel.dispatchEvent(new Event('pointerdown', { bubbles: true }));
    fill(table, [jobRow(JOBS[1], steer), jobRow(JOBS[2], steer)], 8, 'no jobs');
    expect(button(table, 'cancel')).toBe(cancel); // not drawn again under the pointer
    cancel.dispatchEvent(new Event('pointerup', { bubbles: true }));
    cancel.click();
    expect(asked).toContain('cancel j-run');
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(table.tBodies[0].rows.length).toBe(2); // the redraw held back, after the click
  });

  it('rows whose buttons and fields ask the steering', () => {
    const { asked, steer } = recorder();
    const gpu = gpuRow(GPUS[0], steer);
    button(gpu, 'drain').click();
    button(gpuRow(GPUS[3], steer), 'undrain').click();
    const job = jobRow(JOBS[1], steer);
    button(job, 'suspend').click();
    button(job, 'cancel').click();
    button(jobRow(JOBS[2], steer), 'resume').click();
    const field = job.querySelector<HTMLInputElement>('input')!;
    field.value = '3';
    field.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    button(job, 'priority').click();
    expect(asked).toEqual([
      'drain 0 true',
      'drain 3 false',
      'suspend j-run',
      'cancel j-run',
      'resume j-held',
      'priority j-run 3',
      'priority j-run 3'
    ]);
  });
});

describe("the admin page's actions", () => {
  it('drain only once confirmed, with the XSRF header of the cookie', async () => {
    const { server, page, confirms } = setUp({ confirm: false });
    await page.drain(GPUS[0], true);
    expect(confirms).toEqual([
      'Drain GPU 0 for maintenance? No job will get it. Job j-run (ann) moves to other GPUs.'
    ]);
    expect(server.changes).toEqual([]);

    const confirmed = setUp({ confirm: true });
    await confirmed.page.drain(GPUS[0], true);
    const [drain] = confirmed.server.changes;
    expect(drain.method).toBe('POST');
    expect(drain.url).toBe(`${API}gpus/0/drain`);
    expect(drain.body).toEqual({ drained: true });
    expect(drain.headers['X-XSRFToken']).toBe('cookie-xsrf');
    expect(drain.headers.Authorization).toBeUndefined();
    expect(document.getElementById('message')!.textContent).toBe('GPU 0 drained');
    expect(document.getElementById('message')!.className).toContain('ok');
    // ...and the page is drawn again.
    expect(confirmed.server.requests[confirmed.server.requests.length - 1].url).toBe(
      `${API}admin/shares`
    );
  });

  it("send the page's token, and the page's XSRF token where no cookie has one", async () => {
    const { server, page } = setUp({ token: 'tok' });
    document.cookie = '_xsrf=; expires=Thu, 01 Jan 1970 00:00:00 GMT';
    await page.resume(JOBS[2]);
    const [resume] = server.changes;
    expect([resume.method, resume.url]).toEqual(['POST', `${API}jobs/j-held/resume`]);
    expect(resume.headers.Authorization).toBe('token tok');
    expect(resume.headers['X-XSRFToken']).toBe('page-xsrf');
    expect(server.requests.filter(r => r.method === 'GET')[0].headers['X-XSRFToken']).toBe(
      undefined
    );
  });

  it('suspend, cancel, priority and a group weight, each its request', async () => {
    const { server, page, confirms } = setUp();
    await page.suspend(JOBS[1]);
    await page.cancel(JOBS[1]);
    await page.setPriority(JOBS[1], 3);
    await page.setWeight('deep lab', 0.5);
    expect(server.changes.map(r => [r.method, r.url.slice(API.length), r.body])).toEqual([
      ['POST', 'jobs/j-run/suspend', {}],
      ['POST', 'jobs/j-run/cancel', {}],
      ['POST', 'jobs/j-run/priority', { priority: 3 }],
      ['PUT', 'admin/groups/deep%20lab/weight', { weight: 0.5 }]
    ]);
    expect(confirms).toEqual([
      'Suspend job j-run (bert) of ann? It checkpoints, stops and gets no GPUs until resumed.',
      'Cancel job j-run (bert) of ann? It stops for good.'
    ]);
    expect(document.getElementById('message')!.textContent).toBe(
      'Weight of group deep lab set to 0.5'
    );
  });

  it("a refusal in the API's words", async () => {
    const { server, page } = setUp();
    server.answers['POST jobs/j-run/priority'] = {
      status: 400,
      body: { message: 'priority must be at most 100', reason: 'invalid' }
    };
    await page.setPriority(JOBS[1], 1000);
    const message = document.getElementById('message')!;
    expect(message.textContent).toBe(
      'Priority of job j-run set to 1000 failed: priority must be at most 100'
    );
    expect(message.className).toBe('jp-ElasticAdmin-message');
    expect(message.hidden).toBe(false);
  });

  it('follow the state by long polls, and say when it cannot', async () => {
    const { server, page } = setUp();
    const polls: IAnswer[] = [{ body: { version: 4 } }, { status: 503, body: null }];
    server.answers['GET updates'] = () => polls.shift()!;
    await page.follow();
    const updates = server.requests.filter(r => r.url.includes('updates')).map(r => r.url);
    expect(updates).toEqual([
      `${API}updates?since=-1&timeout=10`,
      `${API}updates?since=4&timeout=10`
    ]);
    expect(rows('gpus')).toHaveLength(5);
    expect(document.getElementById('live')!.textContent).toBe('reconnecting: 503 Refused');
  });
});
