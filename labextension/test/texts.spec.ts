/**
 * @jest-environment jsdom
 *
 * What a new user reads on a card: no end before the scheduler trusts its estimate.
 */
import { lossChart, lossRange } from '../src/chart';
import { ESTIMATING_END, JobCard } from '../src/jobcard';
import { JOB } from './fakes-data';

jest.mock('../src/icon', () => ({ gpuIcon: undefined }));

const me = { user: 'ann', admin: false, mode: 'embedded' as const };
const ctx = { me, canOpenNotebook: false, progress: [], now: 0 };

describe('the end of a running job', () => {
  const running = (more: object) =>
    JOB('j-1', {
      state: 'running',
      progress: { epoch: 0, epochs: 20, fraction: 0.01, samples_per_s: 0.1 },
      ...more
    }) as any;

  it('says estimating while the API does, with no time and no time left', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    card.update(running({ estimating: true, estimated_end: null, eta_s: null }), ctx);
    const text = card.node.textContent ?? '';
    expect(text).toContain(ESTIMATING_END);
    expect(text).not.toContain(' left');
    expect(text).not.toMatch(/Ends about/);
  });

  it('tells the end once the API gives it', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    card.update(running({ estimating: false, estimated_end: 720, eta_s: 700 }), ctx);
    expect(card.node.textContent).toContain('Ends about');
    expect(card.node.textContent).not.toContain(ESTIMATING_END);
  });

  it('is not estimating for a queued job (its start is what it waits for) nor a lease', () => {
    const card = new JobCard({ detail: 'compact', onAction: jest.fn() });
    card.update(JOB('j-2', { state: 'queued', estimating: true }) as any, ctx);
    expect(card.node.textContent).not.toContain(ESTIMATING_END);
    card.update(
      JOB('j-3', { state: 'running', kind: 'interactive', estimating: true }) as any,
      ctx
    );
    expect(card.node.textContent).not.toContain(ESTIMATING_END);
  });
});

describe('the loss chart of a job whose first steps lose much more', () => {
  // 2.3 at the first step, then between 0.3 and 0.1: held whole, the rest is a flat line.
  const records = Array.from({ length: 50 }, (_, i) => ({
    t: i,
    global_step: i * 10,
    loss: i === 0 ? 2300 : 0.1 + 0.2 / i,
    replicas: 1
  }));
  const ys = (chart: SVGSVGElement) =>
    chart
      .querySelector('.jp-ElasticGpu-lossLine')!
      .getAttribute('points')!
      .split(' ')
      .map(p => Number(p.split(',')[1]));

  it('scales to the later part, so the curve after the first steps is visible', () => {
    const range = lossRange(records);
    expect(range.hi).toBeCloseTo(0.14, 5); // the first tenth of the steps may lie above
    expect(range.above).toBe(2300);
    const chart = lossChart(records)!;
    const later = ys(chart).slice(5);
    // The later curve spans most of the plot's height (150 - 14 - 30), not a pixel.
    expect(Math.max(...later) - Math.min(...later)).toBeGreaterThan(60);
    expect(chart.querySelector('.jp-ElasticGpu-lossAbove')!.textContent).toContain('2300');
  });

  it('leaves a curve without such a start whole', () => {
    const calm = records.map((r, i) => ({ ...r, loss: 1 - i / 100 }));
    expect(lossRange(calm)).toEqual({ lo: 0.51, hi: 1, above: null });
    expect(lossChart(calm)!.querySelector('.jp-ElasticGpu-lossAbove')).toBeNull();
  });
});
