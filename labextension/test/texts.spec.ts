/**
 * @jest-environment jsdom
 *
 * What a new user reads on a card: no end before the scheduler trusts its estimate.
 */
import { ESTIMATING_END, JobCard } from '../src/jobcard';
import { JOB } from './fakes-data';

jest.mock('../src/icon', () => ({ gpuIcon: undefined }));

const me = { user: 'ann', admin: false };
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
