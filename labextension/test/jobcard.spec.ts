/**
 * @jest-environment jsdom
 *
 * What a person meets on a job card that updates while they read it: the grant changes they
 * opened, the resize labels at the chart's edge, and a readable loss axis.
 */
import { lossChart, ticks } from '../src/chart';
import { JobCard } from '../src/jobcard';
import { reasonText } from '../src/reasons';
import { IReasonFigures } from '../src/types';
import { JOB } from './fakes-data';

jest.mock('../src/icon', () => ({ gpuIcon: undefined }));

const me = { user: 'ann', admin: false, mode: 'embedded' as const };

const records = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    t: i,
    global_step: i * 10,
    loss: 2 / (i + 1),
    replicas: 4
  }));

describe('the grant changes of a full card', () => {
  const job = (epoch: number) =>
    JOB('j-1', {
      state: 'running',
      progress: { epoch, epochs: 20, fraction: epoch / 20, loss: 0.5 },
      history: [
        { t: 1, gpus: ['0', '1', '2', '3'], why: 'admitted' },
        { t: 2, gpus: ['0', '1'], why: 'a shorter job arrived' }
      ],
      resizes: 1
    }) as any;

  it('stay open across progress updates once a person opened them', () => {
    const card = new JobCard({ detail: 'full', onAction: jest.fn() });
    card.update(job(1), { me, canOpenNotebook: false, progress: records(2), now: 0 });
    const details = () =>
      card.node.querySelector('details.jp-ElasticGpu-resizes') as HTMLDetailsElement;
    expect(details().open).toBe(false);
    details().open = true;
    card.update(job(2), { me, canOpenNotebook: false, progress: records(3), now: 0 });
    expect(details().open).toBe(true);
    details().open = false;
    card.update(job(3), { me, canOpenNotebook: false, progress: records(4), now: 0 });
    expect(details().open).toBe(false);
  });
});

describe('the actions of an open job', () => {
  const ctx = { me, canOpenNotebook: false, progress: [], now: 0 };
  const actions = (card: JobCard) =>
    Array.from(card.node.querySelectorAll<HTMLButtonElement>('button[data-action]')).map(
      b => b.dataset.action
    );

  it('offer Suspend, and Resume once the job is held, next to Cancel', () => {
    const onAction = jest.fn();
    const card = new JobCard({ detail: 'full', onAction });
    card.update(JOB('j-1', { state: 'running' }) as any, ctx);
    expect(actions(card)).toEqual(['logs', 'suspend', 'cancel']);
    card.node.querySelector<HTMLButtonElement>('[data-action="suspend"]')!.click();
    expect(onAction).toHaveBeenCalledWith('suspend', expect.objectContaining({ id: 'j-1' }));
    expect(card.node.querySelector<HTMLButtonElement>('[data-action="suspend"]')!.disabled).toBe(
      true
    );
    card.update(JOB('j-1', { state: 'queued', held: true }) as any, ctx);
    expect(actions(card)).toEqual(['logs', 'resume', 'cancel']);
    expect(card.node.querySelector<HTMLButtonElement>('[data-action="resume"]')!.disabled).toBe(
      false
    );
  });

  it('stay in place while the card redraws around them, so no click is lost', () => {
    // A press on a button and its release on a copy drawn in between make no click at all:
    // the card redraws whenever progress arrives, every few seconds.
    const onAction = jest.fn();
    const card = new JobCard({ detail: 'full', onAction });
    const job = JOB('j-1', { state: 'running' }) as any;
    card.update(job, { ...ctx, progress: records(2) });
    const cancel = card.node.querySelector<HTMLButtonElement>('[data-action="cancel"]')!;
    const watch = new MutationObserver(() => undefined);
    watch.observe(card.node, { childList: true, subtree: true });
    card.update({ ...job }, { ...ctx, progress: records(3) });
    const removed = watch.takeRecords().flatMap(m => Array.from(m.removedNodes));
    expect(removed.length).toBeGreaterThan(0); // the rest was redrawn
    expect(removed.some(n => n.contains(cancel))).toBe(false);
    expect(card.node.querySelector('[data-action="cancel"]')).toBe(cancel);
    expect(actions(card)).toEqual(['logs', 'suspend', 'cancel']);
    cancel.click();
    expect(onAction).toHaveBeenCalledWith('cancel', expect.objectContaining({ id: 'j-1' }));
  });

  it('mark an interactive lease and offer Release, never Suspend nor a log', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    const lease = {
      state: 'running' as const,
      kind: 'interactive' as const,
      gpus: ['1'],
      estimated_end: 100
    };
    card.update(JOB('j-3', lease) as any, ctx);
    expect(card.node.dataset.jobKind).toBe('interactive');
    expect(card.node.querySelector('.jp-ElasticGpu-lease')!.textContent).toBe('interactive lease');
    // Nothing runs for a lease (no log), and it ends when its kernel does (no forecast end).
    expect(actions(card)).toEqual(['cancel']);
    expect(card.node.textContent).not.toContain('Ends');
    expect(card.node.querySelector('[data-action="cancel"]')!.textContent).toBe('Release');
  });

  it("offer neither on a finished job, nor on another user's", () => {
    const card = new JobCard({ detail: 'full', onAction: jest.fn() });
    card.update(JOB('j-1', { state: 'done' }) as any, ctx);
    expect(actions(card)).not.toContain('suspend');
    card.update(JOB('j-2', { state: 'running', user: 'bob' }) as any, ctx);
    expect(actions(card)).toEqual([]);
  });
});

describe('a queued job with its forecast', () => {
  // 13:59 local time; the forecast says 14:03 (4 min later), after j-12.
  const now = new Date(2026, 0, 5, 13, 59, 0).getTime();
  const start = now / 1000 + 240;
  const waiting: IReasonFigures = {
    needs: 2,
    free: 0,
    holders: [{ id: 'j-12', ahead: 'shorter' }]
  };
  const shown = 'needs 2 GPUs, 0 free; GPUs held by j-12 (shorter)';
  const forecast = { start_in_s: 240, start_after: { id: 'j-12' } };
  const queued = (figures: IReasonFigures, extra: Record<string, unknown> = {}) =>
    JOB('j-7', {
      state: 'queued',
      reason: reasonText('waiting', figures),
      reason_kind: 'waiting',
      reason_figures: figures,
      estimated_start: start,
      ...extra
    }) as any;
  const texts = (card: JobCard) => ({
    reason: card.node.querySelector('.jp-ElasticGpu-reason')?.textContent ?? null,
    start: card.node.querySelector('.jp-ElasticGpu-start')?.textContent ?? null
  });
  const clock = new Date(start * 1000).toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit'
  });

  it('says when it starts once, with the clock time and whose end it waits for', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    const job = queued({ ...waiting, ...forecast });
    card.update(job, { me, canOpenNotebook: false, now });
    expect(texts(card)).toEqual({
      reason: shown,
      start: `Starts about ${clock} (in 4 min), when j-12 finishes.`
    });
    expect(card.node.textContent!.match(/starts/gi)).toHaveLength(1);
    // The scheduler's whole sentence stays on hover.
    expect(card.node.querySelector('.jp-ElasticGpu-reason')!.getAttribute('title')).toBe(
      `queued: ${shown}; starts in ~4 min, when j-12 finishes`
    );
  });

  it('names the job it waits for as the viewer knows it, else as the scheduler named it', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    const nameOf = (id: string) => (id === 'j-12' ? 'resnet50-sweep' : null);
    card.update(queued({ ...waiting, ...forecast }), { me, canOpenNotebook: false, now, nameOf });
    expect(texts(card).start).toBe(
      `Starts about ${clock} (in 4 min), when resnet50-sweep finishes.`
    );
    const named = { start_in_s: 240, start_after: { id: 'j-12', name: 'mnist' } };
    card.update(queued({ ...waiting, ...named }), { me, canOpenNotebook: false, now });
    expect(texts(card).start).toBe(`Starts about ${clock} (in 4 min), when mnist finishes.`);
  });

  it('names the kind of GPU it starts on where kinds are mixed, once', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    const onA100 = { ...forecast, start_kind: 'A100-80GB' };
    card.update(queued({ ...waiting, ...onA100 }), { me, canOpenNotebook: false, now });
    expect(texts(card)).toEqual({
      reason: shown,
      start: `Starts about ${clock} (in 4 min) on A100-80GB, when j-12 finishes.`
    });
    expect(card.node.querySelector('.jp-ElasticGpu-reason')!.getAttribute('title')).toBe(
      `queued: ${shown}; starts in ~4 min on A100-80GB, when j-12 finishes`
    );
  });

  it('drops the forecast words without a job to wait for, and under a minute', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    card.update(queued({ ...waiting, start_in_s: 20 }), { me, canOpenNotebook: false, now });
    expect(texts(card)).toEqual({ reason: shown, start: `Starts about ${clock} (in 4 min).` });
  });

  it('keeps the reason whole where the card shows no start time', () => {
    const figures = { ...waiting, ...forecast };
    const whole = `${shown}; starts in ~4 min, when j-12 finishes`;
    // Nobody known yet: no forecast line, so the reason keeps its figures.
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    card.update(queued(figures), { me: null, canOpenNotebook: false, now });
    expect(texts(card)).toEqual({ reason: whole, start: null });
    // No estimate: the reason is left as the scheduler said it.
    const other = new JobCard({ detail: 'compact', onAction: jest.fn() });
    other.update(queued(figures, { estimated_start: null }), { me, canOpenNotebook: false, now });
    expect(texts(other)).toEqual({
      reason: whole,
      start: 'No start time can be estimated yet.'
    });
    expect(other.node.querySelector('.jp-ElasticGpu-reason')!.hasAttribute('title')).toBe(false);
  });

  it('shows the words of a scheduler that sends no kind as they came', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    const reason = 'queued: suspended by ann; starts in ~4 min, when j-12 finishes, maybe';
    card.update(JOB('j-7', { state: 'queued', reason, estimated_start: start }) as any, {
      me,
      canOpenNotebook: false,
      now
    });
    expect(texts(card).reason).toBe(reason);
  });
});

describe('the loss chart', () => {
  it('keeps a resize label at the last step inside the chart', () => {
    const data = records(10);
    data[data.length - 1].replicas = 2;
    const chart = lossChart(data)!;
    const width = Number(chart.getAttribute('viewBox')!.split(' ')[2]);
    const label = chart.querySelector('.jp-ElasticGpu-resizeMark text')!;
    expect(label.textContent).toBe('4\u21922');
    // Without layout in jsdom, bound the label by a generous 7 px per character at 9 px.
    const x = Number(label.getAttribute('x'));
    const right = label.getAttribute('text-anchor') === 'end' ? x : x + 7 * 4;
    expect(right).toBeLessThanOrEqual(width);
  });

  it('keeps a resize label in the middle to the right of its line', () => {
    const data = records(10);
    data[5].replicas = data[6].replicas = data[7].replicas = 2;
    const label = lossChart(data)!.querySelector('.jp-ElasticGpu-resizeMark text')!;
    expect(label.getAttribute('text-anchor')).toBeNull();
  });

  it.each([
    [0.03, 0.9],
    [0.031, 0.93],
    [0, 1],
    [0.3, 0.5],
    [0, 0.71],
    [1, 6],
    [0, 300],
    [2.4, 2.5],
    [0.11, 0.35]
  ])('labels at least 3 ticks from %p to %p, at a step of 1, 2 or 5 x 10^k', (lo, hi) => {
    const out = ticks(lo, hi);
    expect(out.length).toBeGreaterThanOrEqual(3);
    expect(out.every(v => v >= lo - 1e-12 && v <= hi + 1e-12)).toBe(true);
    const step = out[1] - out[0];
    const mantissa = Number((step / Math.pow(10, Math.floor(Math.log10(step)))).toPrecision(6));
    expect([1, 2, 5]).toContain(mantissa);
  });

  it('writes large step counts as people do (10K, not 1e+4)', () => {
    const data = records(3).map((r, i) => ({ ...r, global_step: i * 12_000 }));
    const chart = lossChart(data)!;
    const xLabels = [...chart.querySelectorAll('.jp-ElasticGpu-axis text[text-anchor="middle"]')];
    const texts = xLabels.map(t => t.textContent);
    expect(texts).toContain('10K');
    expect(texts.some(t => /e\+/.test(t ?? ''))).toBe(false);
  });

  it('gives the loss axis 3 labels when the loss spans 0.03 to 0.9', () => {
    const data = records(2);
    data[0].loss = 0.9;
    data[1].loss = 0.03;
    const chart = lossChart(data)!;
    const yLabels = [...chart.querySelectorAll('.jp-ElasticGpu-axis text[text-anchor="end"]')];
    expect(yLabels.map(t => t.textContent)).toEqual(['0.2', '0.4', '0.6', '0.8']);
  });
});

describe('the meta line of a script job', () => {
  const ctx = { me, canOpenNotebook: false, progress: [], now: 0 };
  const meta = (extra: object) => {
    const card = new JobCard({ detail: 'full', onAction: jest.fn() });
    card.update(JOB('j-1', extra), ctx);
    return card.node.querySelector('.jp-ElasticGpu-jobMeta')!.textContent;
  };

  it('says the framework that trains it, and when its GPU count never changes', () => {
    expect(meta({ framework: 'lightning', elastic: true })).toBe(
      'ann \u00b7 asks 1\u20132 GPUs \u00b7 #1 in the queue \u00b7 framework lightning'
    );
    expect(meta({ framework: 'torchrun', elastic: false, min_gpus: 2, max_gpus: 2 })).toBe(
      'ann \u00b7 asks 2 GPUs \u00b7 #1 in the queue \u00b7 framework torchrun, not elastic'
    );
    expect(meta({})).not.toContain('framework'); // synthetic jobs and leases have none
  });

  it('says a MIG slice where the job asks for one', () => {
    expect(meta({ mig: '1g.10gb', min_gpus: 1, max_gpus: 1 })).toBe(
      'ann \u00b7 asks a 1g.10gb MIG slice \u00b7 #1 in the queue'
    );
    const held = meta({ mig: '3g.40gb', state: 'running', gpus: ['MIG-a'], position: null });
    expect(held).toBe(
      'ann \u00b7 holds a 3g.40gb MIG slice (MIG-a) \u00b7 asks a 3g.40gb MIG slice'
    );
  });
});

describe("the trainer's note", () => {
  const ctx = { me, canOpenNotebook: false, progress: [], now: 0 };
  const note = (extra: object) => {
    const card = new JobCard({ detail: 'full', onAction: jest.fn() });
    card.update(JOB('j-1', extra), ctx);
    return card.node.querySelector('[data-trainer-note]')?.textContent ?? null;
  };
  const said = 'the script asks for Trainer(devices=8); the job\u2019s grant decides: devices=2';

  it('shows what the adapter says of a running job, and nothing once it has ended', () => {
    const progress = { replicas: 2, global_step: 3, note: said };
    expect(note({ state: 'running', gpus: ['0', '1'], progress })).toBe(`trainer: ${said}`);
    expect(note({ state: 'done', progress })).toBeNull();
    expect(note({ state: 'running', progress: { replicas: 2 } })).toBeNull();
  });
});

describe('the gradient noise scale', () => {
  const ctx = { me, canOpenNotebook: false, progress: [], now: 0 };
  const line = (extra: object, detail: 'full' | 'compact' = 'full') => {
    const card = new JobCard({ detail, onAction: jest.fn() });
    card.update(JOB('j-1', { measure_noise: true, ...extra }), ctx);
    return card.node.querySelector('[data-noise-scale]')?.textContent ?? null;
  };

  it('says how well the batch uses each sample, as the text view does', () => {
    const progress = { noise_scale: 1850.4, noise_steps: 600, batch_size: 256 };
    expect(line({ state: 'running', progress })).toBe(
      'gradient noise scale 1,850 samples (from 600 step pairs): batch 256 makes 88% of the ' +
        'use of each sample that a small batch makes'
    );
    expect(line({ state: 'running', progress: { replicas: 2 } })).toBe(
      'gradient noise scale: measuring'
    );
    expect(line({ state: 'running', progress: { noise_scale: null, noise_steps: 40 } })).toContain(
      'not measurable yet (40 step pairs'
    );
    expect(line({ state: 'running', progress, measure_noise: false })).toBeNull();
    expect(line({ state: 'running', progress }, 'compact')).toBeNull();
  });
});
