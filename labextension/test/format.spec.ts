import { duration, epochText, reasonAfterState } from '../src/format';

describe('words', () => {
  it.each([
    ['done', 'done', ''],
    ['queued', 'queued: needs 2 GPUs, 0 free', 'needs 2 GPUs, 0 free'],
    ['starting', 'starting on 2 GPUs', 'on 2 GPUs'],
    ['running', 'kept as is', 'kept as is'],
    ['failed', null, '']
  ])('a %s reason next to its badge', (state, reason, shown) => {
    expect(reasonAfterState(state, reason)).toBe(shown);
  });

  it.each([
    ['running', { epoch: 4, epochs: 20 }, 'epoch 5/20'],
    ['running', { epoch: 398, epochs: 128 }, 'epoch 128/128'],
    ['done', { epoch: 3, epochs: 20 }, 'epoch 20/20'],
    ['running', { epoch: 2 }, 'epoch 3'],
    ['running', { epoch: null, epochs: 5 }, 'epoch 1/5'],
    ['queued', null, null]
  ])('a %s job at %j reads %s', (state, progress, text) => {
    expect(epochText({ id: 'j', user: 'u', state, progress } as any)).toBe(text);
  });

  it('says durations as people do', () => {
    expect([duration(45), duration(420), duration(4320)]).toEqual(['45 s', '7 min', '1 h 12 min']);
    expect([36 * 3600, 7 * 86400, 54 * 3600].map(duration)).toEqual([
      '36 h',
      '7 days',
      '2 days 6 h'
    ]);
  });
});
