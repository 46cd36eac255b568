import * as fs from 'fs';
import * as path from 'path';

import { about, gpuRange, reasonAfterState, reasonParts, reasonText } from '../src/reasons';
import { IReasonFigures, ReasonKind } from '../src/types';

/** The shared fixtures: the Python formatter (tests/core/test_reason_texts.py) reads them too. */
const CASES: { kind: ReasonKind; figures: IReasonFigures; text: string }[] = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'fixtures', 'reasons.json'), 'utf8')
);

describe('reasons', () => {
  it.each(CASES.map((c, i) => [`${c.kind}-${i}`, c] as const))(
    'says %s as the scheduler does',
    (_, c) => {
      expect(reasonText(c.kind, c.figures)).toBe(c.text);
    }
  );

  it('leaves out the state its badge shows, and nothing else', () => {
    const waiting = { needs: 2, free: 0 };
    expect(reasonAfterState('queued', 'waiting', waiting)).toBe('needs 2 GPUs, 0 free');
    expect(reasonAfterState('starting', 'starting', { gpus: 2 })).toBe('on 2 GPUs');
    expect(reasonAfterState('done', 'done')).toBe('');
    expect(reasonAfterState('queued', 'waiting', { ...waiting, suspended: true })).toBe(
      'suspended: needs 2 GPUs, 0 free'
    );
  });

  it('has a detail after the grant it explains', () => {
    expect(reasonParts('crowded', { gpus: 2, top: 4 }).detail).toBe(
      'the others help other jobs more'
    );
    expect(reasonParts('starting', { gpus: 2 }).detail).toBe('');
  });

  it('writes a GPU range one way', () => {
    expect([gpuRange(1, 4), gpuRange(2, 2), gpuRange(1, 1)]).toEqual([
      '1–4 GPUs',
      '2 GPUs',
      '1 GPU'
    ]);
  });

  it('rounds as Python does', () => {
    expect([0.2, 4.5, 12.5, 33, 59, 150, 3000, 5400, 4500, 36000, 2e5].map(about)).toEqual([
      'under 1 s',
      '~4 s',
      '~10 s',
      '~35 s',
      '~1 min',
      '~2 min',
      '~50 min',
      '~1.5 h',
      '~1.2 h',
      '~10 h',
      '~2.3 days'
    ]);
  });
});
