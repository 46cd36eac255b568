/**
 * @jest-environment jsdom
 *
 * The status-bar item: its counts and words, and its node.
 */
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { fromDocuments, EMPTY } from '../src/state';
import { GpuStatusItem, gpuSummary, summaryText, summaryTitle } from '../src/statusbar';
import { IGpu, IQueueEntry } from '../src/types';
import { GPU, JOB } from './fakes-data';

const gpus = [
  GPU(0, { holder: 'j-1', holder_user: 'ann' }),
  GPU(1, { holder: 'j-1', holder_user: 'ann' }),
  GPU(2, { holder: 'j-2', holder_user: 'bob' }),
  GPU(3, { external_processes: [{ pid: 7, user: 'carl', memory_mb: null, command: null }] }),
  GPU(4)
] as IGpu[];
const queue = [
  JOB('j-1', { state: 'running', position: null }),
  JOB('j-2', { state: 'resizing', user: 'bob', position: null }),
  JOB('j-3', { state: 'queued', user: 'bob' })
] as IQueueEntry[];
const data = fromDocuments(EMPTY, 3, { source: 'simulated', gpus }, queue, []);

describe('the status-bar item', () => {
  it('counts GPUs in use (held or busy), the caller’s, and running and queued jobs', () => {
    const s = gpuSummary(data, 'ann')!;
    expect(s).toEqual({ used: 4, total: 5, mine: 2, running: 2, queued: 1 });
    expect(summaryText(s)).toBe('GPUs 4/5 in use \u00b7 1 queued');
    expect(summaryText({ ...s, queued: 0 })).toBe('GPUs 4/5 in use');
    expect(summaryText({ ...s, used: 0, total: 0 })).toBe('No GPUs');
    expect(summaryTitle(s)).toBe(
      '4 of 5 GPUs in use (2 by your jobs); 2 jobs running, 1 queued. Click to show the GPU queue.'
    );
    expect(gpuSummary(EMPTY, 'ann')).toBeNull();
  });

  it('shows the counts as text and attributes, and opens the queue on a click or Enter', () => {
    let acquired = 0;
    const model = {
      changed: new Signal<any, void>({}),
      data,
      whoami: { user: 'ann', admin: false, mode: 'embedded' as const },
      problem: null as any,
      acquire: () => {
        acquired++;
        return { isDisposed: false, dispose: () => void acquired-- };
      }
    };
    let opened = 0;
    const item = new GpuStatusItem(model, () => opened++);
    Widget.attach(item, document.body); // on screen: it holds the model live
    expect(acquired).toBe(1);
    expect(item.node.textContent).toBe('GPUs 4/5 in use \u00b7 1 queued');
    expect({ ...item.node.dataset }).toMatchObject({
      gpusUsed: '4',
      gpusTotal: '5',
      jobsQueued: '1',
      version: '3'
    });
    item.node.click();
    item.node.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    expect(opened).toBe(2);
    // A server without the scheduler: the item hides and asks nothing more.
    let hidden = 0;
    item.relevantChanged.connect(() => hidden++);
    model.problem = { kind: 'not-enabled', message: 'not enabled' };
    model.changed.emit();
    expect([item.relevant, hidden, acquired]).toEqual([false, 1, 0]);
    item.dispose();
  });
});
