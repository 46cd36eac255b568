/** The admin page's documents as the API answers them, typed as the page reads them. */
import { IGpu, IGpuInventory, IJob, IShares } from '../src/types';

/** A GPU as the API sends it: every field, those a case leaves out at their empty value. */
function gpu(fields: Partial<IGpu> & Pick<IGpu, 'id' | 'index'>): IGpu {
  return {
    node: 'box',
    name: 'Simulated GPU',
    kind: 'simulated',
    uuid: null,
    memory_total_mb: null,
    memory_used_mb: null,
    utilization: null,
    holder: null,
    holder_user: null,
    holder_name: null,
    external_processes: [],
    healthy: true,
    drained: false,
    ...fields
  };
}

export const GPUS: IGpu[] = [
  gpu({
    id: '0',
    index: 0,
    memory_total_mb: 16384,
    memory_used_mb: 512,
    utilization: 0.5,
    holder: 'j-run',
    holder_user: 'ann',
    holder_name: 'bert'
  }),
  gpu({ id: '1', index: 1 }),
  gpu({ id: '2', index: 2, holder: 'j-run', holder_user: 'ann', drained: true }),
  gpu({ id: '3', index: 3, drained: true }),
  gpu({
    id: '4',
    index: 4,
    external_processes: [
      { pid: 7, user: 'eve', memory_mb: 300, command: 'python' },
      { pid: 8, user: null, memory_mb: null, command: null }
    ],
    healthy: false
  })
];

export const INVENTORY: IGpuInventory = { source: 'simulated', gpus: GPUS };

export const JOBS: IJob[] = [
  {
    id: 'j-old',
    user: 'bob',
    name: 'finished long ago',
    state: 'done',
    gpus: [],
    min_gpus: 1,
    max_gpus: 1,
    priority: 1.5,
    reason: 'done',
    submitted_at: 10,
    finished_at: 100
  },
  {
    id: 'j-run',
    user: 'ann',
    name: 'bert',
    state: 'running',
    gpus: ['0', '2'],
    min_gpus: 1,
    max_gpus: 4,
    priority: 1,
    reason: 'running on 2 GPUs',
    reason_kind: 'running',
    reason_figures: { gpus: 2 },
    submitted_at: 50
  },
  {
    id: 'j-held',
    user: 'cy',
    name: 'resnet',
    state: 'queued',
    held: true,
    gpus: [],
    min_gpus: 2,
    max_gpus: 2,
    priority: 2,
    reason: 'queued: suspended by ops (an admin)',
    submitted_at: 20
  },
  {
    id: 'j-new',
    user: 'bob',
    name: 'cancelled soon',
    state: 'cancelled',
    gpus: [],
    min_gpus: 1,
    max_gpus: 1,
    priority: 1,
    reason: 'cancelled by bob',
    submitted_at: 30,
    finished_at: 200
  }
];

export const SHARES: IShares = {
  half_life_s: 7 * 86400,
  gpus: 4,
  users: [
    {
      user: 'ann',
      groups: ['lab'],
      weight: 2,
      share: 2 / 3,
      entitled_gpus: 3,
      gpus: 2,
      usage_gpu_s: 3600,
      usage_fraction: 0.25,
      ratio: 0.375
    },
    {
      user: 'bob',
      groups: [],
      weight: 1,
      share: 1 / 3,
      entitled_gpus: 1,
      gpus: 0,
      usage_gpu_s: 10800,
      usage_fraction: 0.75,
      ratio: 2.25
    }
  ],
  groups: [{ group: 'deep lab', weight: 2, users: ['ann'], gpus: 2, usage_fraction: 0.25 }]
};
