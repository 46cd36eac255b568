/** Which change of a job yields which notification, and that each is told once. */
import { Signal } from '@lumino/signaling';

import { ElasticGpuModel, IProblem } from '../src/model';
import {
  IMemory,
  INotice,
  INotifierModel,
  JobNotifier,
  MAX_NOTICES_AT_ONCE,
  idleWarning,
  milestone,
  noticeFor,
  noticesFor,
  reasonDetail,
  untold
} from '../src/notify';
import { EMPTY, IPanelData } from '../src/state';
import { IJob, IWhoami } from '../src/types';
import { FakeServer, FakeSocket, JOB, fakeApi, standardRoutes } from './fakes';

const start = (t: number, n: number, why = `running on ${n} GPUs (its maximum)`) => ({
  t,
  gpus: Array.from({ length: n }, (_, i) => String(i)),
  why
});
/** A grant change whose reason has its kind and figures, as the scheduler sends it. */
const crowded = (t: number) => ({
  ...start(t, 2, 'running on 2 of up to 4 GPUs: the others help other jobs more'),
  why_kind: 'crowded' as const,
  why_figures: { gpus: 2, top: 4 }
});
const stop = (t: number) => ({ t, gpus: [], why: 'queued: suspended by ann' });

function job(extra: Partial<IJob> = {}): IJob {
  return JOB('j-1', { name: 'mnist', ...extra });
}

describe('milestone', () => {
  it('says nothing while a job waits or starts', () => {
    expect(milestone(job({ state: 'queued' }))).toBeNull();
    expect(milestone(job({ state: 'starting', history: [start(1, 2)], generation: 1 }))).toBeNull();
    expect(milestone(job({ state: 'cancelled' }))).toBeNull();
  });

  it('tells a start once it runs, per grant generation', () => {
    const e = milestone(job({ state: 'running', history: [start(1, 2)], generation: 1 }));
    expect(e).toMatchObject({ kind: 'started', key: 'started:1' });
  });

  it('tells a resize from the grant history, with the reason of the new grant', () => {
    const why = 'running on 2 of up to 4 GPUs: the others help other jobs more';
    for (const state of ['resizing', 'running'] as const) {
      const e = milestone(
        job({ state, history: [start(1, 4), start(2, 2, why)], generation: 2, gpus: ['0', '1'] })
      );
      expect(e).toMatchObject({ kind: 'resized', key: 'resized:2', from: 4, to: 2, why });
    }
  });

  it('tells a resume after a suspension', () => {
    const e = milestone(
      job({ state: 'running', history: [start(1, 2), stop(2), start(3, 1)], generation: 3 })
    );
    expect(e).toMatchObject({ kind: 'resumed', key: 'resumed:3' });
  });

  it('tells the end of a job whatever its history', () => {
    expect(milestone(job({ state: 'done' }))).toMatchObject({ kind: 'done', key: 'done' });
    expect(milestone(job({ state: 'failed' }))).toMatchObject({ kind: 'failed', key: 'failed' });
  });
});

describe('untold', () => {
  const running = job({ state: 'running', history: [start(1, 2)], generation: 1 });

  it('keeps only the caller’s jobs not told yet, and forgets jobs no longer listed', () => {
    const other = { ...running, id: 'j-2', user: 'bob' };
    const result = untold({ 'j-gone': 'done' }, [running, other], 'ann');
    expect(result.events.map(e => [e.job.id, e.kind])).toEqual([['j-1', 'started']]);
    expect(result.told).toEqual({ 'j-1': 'started:1' });
    expect(untold(result.told, [running], 'ann').events).toEqual([]);
  });

  it('keeps what was told of a job that has nothing new (suspended)', () => {
    const suspended = job({ state: 'queued', history: [start(1, 2), stop(2)], generation: 2 });
    expect(untold({ 'j-1': 'started:1' }, [suspended], 'ann')).toEqual({
      events: [],
      told: { 'j-1': 'started:1' }
    });
  });
});

describe('idle warning of a kernel lease', () => {
  const WARNED =
    'idle: its kernel has run nothing for 12 minutes while jobs wait for 4 GPUs; its GPUs are ' +
    'released in 3 minutes unless it runs code';
  const WARNING = { detail: WARNED, release_in_s: 170, idle_s: 725 };
  const lease = (reason: string) =>
    job({
      kind: 'interactive',
      name: 'kernel-1',
      state: 'running',
      history: [start(1, 1)],
      generation: 1,
      gpus: ['0'],
      reason,
      reason_kind: reason === WARNED ? 'idle_warning' : 'kernel',
      reason_figures: reason === WARNED ? WARNING : { gpus: 1 },
      notebook: 'work/explore.ipynb'
    });

  it('is told once per warning, beside the lease start, and again after the kernel ran code', () => {
    const told = untold({}, [lease('holds 1 GPU for its notebook kernel')], 'ann').told;
    expect(told).toEqual({ 'j-1': 'started:1' });
    const warned = untold(told, [lease(WARNED)], 'ann');
    expect(warned.events.map(e => e.kind)).toEqual(['idle']);
    expect(untold(warned.told, [lease(WARNED)], 'ann').events).toEqual([]);
    const used = untold(warned.told, [lease('holds 1 GPU for its notebook kernel')], 'ann');
    expect(used.events).toEqual([]); // running code clears it; the start is not told again
    expect(untold(used.told, [lease(WARNED)], 'ann').events.map(e => e.kind)).toEqual(['idle']);
  });

  it('says which notebook loses its GPUs and when, and stays until dismissed', () => {
    const notice = noticeFor(idleWarning(lease(WARNED))!, true);
    expect(notice.type).toBe('warning');
    expect(notice.autoClose).toBe(false);
    expect(notice.actions).toEqual(['open-notebook']);
    expect(notice.message).toBe(
      'The GPU kernel of work/explore.ipynb loses its GPUs in 3 minutes unless it runs code ' +
        '(idle for 12 minutes)'
    );
    const notLease = job({ state: 'running', reason: WARNED, reason_kind: 'idle_warning' });
    expect(idleWarning(notLease)).toBeNull();
    // A warning by another rule (held too long) says that rule's words.
    const held = 'it has held its GPUs for 2 hours while jobs wait for 2 GPUs (limit 2 hours)';
    const bound = {
      ...lease(WARNED),
      reason: held,
      reason_figures: { detail: held, release_in_s: 60 }
    };
    expect(noticeFor(idleWarning(bound)!, true).message).toBe(
      `The GPU kernel of work/explore.ipynb: ${held}`
    );
  });
});

describe('noticeFor', () => {
  it('says where a job started and why a resize happened', () => {
    const started = milestone(
      job({ state: 'running', history: [start(1, 2)], generation: 1, gpus: ['0', '1'] })
    )!;
    expect(noticeFor(started, true)).toMatchObject({
      message: 'GPU job "mnist" started on 2 GPUs',
      type: 'info',
      actions: []
    });
    const resized = milestone(
      job({ state: 'resizing', history: [start(1, 4), crowded(2)], gpus: ['0', '1'] })
    )!;
    expect(noticeFor(resized, true).message).toBe(
      'GPU job "mnist" resized from 4 to 2 GPUs: the others help other jobs more'
    );
  });

  it('offers the notebook and the log of a finished job, the log alone without a notebook', () => {
    const done = job({
      state: 'done',
      started_at: 100,
      finished_at: 820,
      notebook: 'a.ipynb',
      progress: { loss: 0.0099012 }
    });
    const notice = noticeFor(milestone(done)!, true);
    expect(notice).toMatchObject({
      message: 'GPU job "mnist" is done after 12 min, loss 0.0099',
      type: 'success',
      actions: ['open-notebook', 'logs']
    });
    expect(noticeFor(milestone(done)!, false).actions).toEqual(['logs']);
    expect(noticeFor(milestone({ ...done, notebook: null })!, true).actions).toEqual(['logs']);
  });

  it('says the error of a failed job and stays until dismissed', () => {
    const failed = job({
      state: 'failed',
      name: null,
      error: { type: 'ValueError', message: 'x'.repeat(300) }
    });
    const notice = noticeFor(milestone(failed)!, true);
    expect(notice.type).toBe('error');
    expect(notice.autoClose).toBe(false);
    expect(notice.actions).toEqual(['logs']);
    expect(notice.message.startsWith('GPU job j-1 failed: ValueError: xxx')).toBe(true);
    expect(notice.message.length).toBeLessThanOrEqual(140);
    const exited = noticeFor(milestone(job({ state: 'failed', exit_code: 3 }))!, true);
    expect(exited.message).toBe('GPU job "mnist" failed: its trainer exited with code 3');
  });

  it('sums up many events in one notification', () => {
    const events = Array.from({ length: MAX_NOTICES_AT_ONCE + 1 }, (_, i) =>
      milestone({ ...job({ state: i ? 'done' : 'failed' }), id: `j-${i}` })
    ).map(e => e!);
    expect(noticesFor(events.slice(0, MAX_NOTICES_AT_ONCE), true)).toHaveLength(3);
    expect(noticesFor(events, true)).toEqual([
      {
        message: '4 updates on your GPU jobs: 1 failed, 3 done',
        type: 'error',
        autoClose: false,
        actions: ['show-queue'],
        job: null
      }
    ]);
  });

  it('keeps what a reason adds after its grant', () => {
    const crowded = 'running on 2 of up to 4 GPUs: the others help other jobs more';
    expect(reasonDetail(crowded, 'crowded', { gpus: 2, top: 4 })).toBe(
      'the others help other jobs more'
    );
    const shrunk = {
      gpus: 2,
      top: 4,
      held: 4,
      change_s: -60,
      for_job: { id: 'j-2', name: 'urgent', starts: true }
    };
    expect(reasonDetail('', 'resized', shrunk)).toBe(
      "shrunk from 4 so that 'urgent' can start now (it ends ~1 min later)"
    );
    expect(reasonDetail('', 'kernel', { gpus: 1 })).toBe('holds 1 GPU for its notebook kernel');
    // From a scheduler that sends no kind: the words as they came, never read.
    expect(reasonDetail('shrunk for a shorter job')).toBe('shrunk for a shorter job');
    expect(reasonDetail(null)).toBe('');
  });
});

class FakeModel implements INotifierModel {
  changed = new Signal<this, void>(this);
  data: IPanelData = EMPTY;
  whoami: IWhoami | null = { user: 'ann', admin: false, mode: 'embedded' as const };
  problem: IProblem | null = null;
  acquired = 0;
  /** As the page's model does, it tells its views at once that one more wants it, or one less. */
  acquire() {
    this.acquired++;
    this.changed.emit();
    let held = true;
    return {
      get isDisposed() {
        return !held;
      },
      dispose: () => {
        if (held) {
          held = false;
          this.acquired--;
          this.changed.emit();
        }
      }
    };
  }
  set(jobs: IJob[]): void {
    this.data = {
      ...EMPTY,
      version: 1,
      gpus: [],
      queue: [],
      jobs: new Map(jobs.map(j => [j.id, j]))
    };
    this.changed.emit();
  }
}

class MapMemory implements IMemory {
  values = new Map<string, string>();
  read = (key: string) => this.values.get(key) ?? null;
  write = (key: string, value: string) => void this.values.set(key, value);
  forget = (prefix: string) => {
    for (const key of [...this.values.keys()]) {
      if (key.startsWith(prefix)) {
        this.values.delete(key);
      }
    }
  };
}

describe('JobNotifier', () => {
  const running = job({ state: 'running', history: [start(1, 2)], generation: 1, gpus: ['0'] });
  const done: IJob = { ...running, state: 'done' };

  function setup(memory = new MapMemory()) {
    const model = new FakeModel();
    const told: INotice[] = [];
    const notifier = new JobNotifier({
      model,
      memory,
      scope: '/lab/',
      canOpenNotebook: true,
      emit: n => told.push(n)
    });
    return { model, told, notifier, memory };
  }

  it('tells nothing of what was true when it first looked, then each change once', () => {
    const { model, told, notifier } = setup();
    notifier.enabled = true;
    expect(model.acquired).toBe(1); // it keeps the model live
    model.set([running]);
    expect(told).toEqual([]);
    const next = { ...running, id: 'j-2' };
    model.set([running, next]);
    model.set([running, next]);
    expect(told.map(n => n.message)).toEqual(['GPU job "mnist" started on 1 GPU']);
  });

  it('tells after a reload only what happened since, even while no page was open', () => {
    const memory = new MapMemory();
    const first = setup(memory);
    first.notifier.enabled = true;
    first.model.set([]);
    first.model.set([running]);
    expect(first.told).toHaveLength(1);
    first.notifier.dispose();
    expect(first.model.acquired).toBe(0);

    const again = setup(memory);
    again.notifier.enabled = true;
    again.model.set([done]);
    expect(again.told.map(n => n.type)).toEqual(['success']);
    const third = setup(memory);
    third.notifier.enabled = true;
    third.model.set([done]);
    expect(third.told).toEqual([]);
  });

  it('turned off, tells nothing, holds nothing and forgets; on again, starts afresh', () => {
    const memory = new MapMemory();
    memory.values.set('jupyter-elastic-gpu:told:/other/:ann', '{}');
    const { model, told, notifier } = setup(memory);
    notifier.enabled = true;
    model.set([]);
    notifier.enabled = false;
    expect(model.acquired).toBe(0);
    expect([...memory.values.keys()]).toEqual(['jupyter-elastic-gpu:told:/other/:ann']);
    model.set([running]);
    notifier.enabled = true; // what is true now (j-1 running) is not told
    model.set([running, { ...running, id: 'j-3' }]);
    model.set([done, { ...running, id: 'j-3' }]);
    expect(told.map(n => n.job?.id)).toEqual(['j-3', 'j-1']);
  });

  it('forgets when it starts turned off (the setting is off at start-up)', () => {
    const memory = new MapMemory();
    memory.values.set('jupyter-elastic-gpu:told:/lab/:ann', '{}');
    setup(memory).notifier.enabled = false;
    expect(memory.values.size).toBe(0);
  });

  it('lets go of the model on a server without the scheduler', () => {
    const { model, notifier } = setup();
    notifier.enabled = true;
    model.problem = { kind: 'not-enabled', message: '' };
    model.changed.emit();
    expect(model.acquired).toBe(0);
  });
});

describe("JobNotifier on the page's model", () => {
  const INTERVAL = 3000;
  let errors: Error[] = [];
  let previous: Signal.ExceptionHandler;

  beforeEach(() => {
    jest.useFakeTimers();
    FakeSocket.instances = [];
    FakeSocket.refuse = false;
    errors = [];
    previous = Signal.setExceptionHandler(error => void errors.push(error));
  });

  afterEach(() => {
    Signal.setExceptionHandler(previous);
    jest.useRealTimers();
  });

  it('holds the model, acquired once, and once off, the model asks nothing more', async () => {
    const server = new FakeServer();
    standardRoutes(server, [job({ state: 'running', history: [start(1, 1)], generation: 1 })]);
    const model = new ElasticGpuModel({
      api: fakeApi(server),
      interval: INTERVAL,
      isPageHidden: () => false,
      pageEvents: null
    });
    const notifier = new JobNotifier({
      model,
      memory: new MapMemory(),
      scope: '/lab/',
      canOpenNotebook: true,
      emit: () => undefined
    });
    notifier.enabled = true;
    expect(errors).toEqual([]); // no "Maximum call stack size exceeded" from a nested update
    expect(model.active).toBe(true);
    FakeSocket.last?.drop(); // the push channel down: the model polls
    await jest.advanceTimersByTimeAsync(INTERVAL);
    expect(server.count('updates')).toBeGreaterThan(0);
    notifier.enabled = false;
    expect(model.active).toBe(false);
    expect(model.transport).toBe('standby');
    const asked = server.requests.length;
    const sockets = FakeSocket.instances.length;
    await jest.advanceTimersByTimeAsync(20 * INTERVAL);
    expect(server.requests).toHaveLength(asked);
    expect(FakeSocket.instances).toHaveLength(sockets);
    expect(FakeSocket.instances.every(s => s.closed)).toBe(true);
    expect(errors).toEqual([]);
    notifier.dispose();
    model.dispose();
  });
});
