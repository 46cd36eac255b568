/** The admin page's documents as the API answers them, typed as the page reads them. */
import { IGpu, IGpuInventory, IJob, IShares } from '../src/types';

export const GPUS: IGpu[] = [
  {
    id: '0',
    index: 0,
    name: 'Simulated GPU',
    memory_total_mb: 16384,
    memory_used_mb: 512,
    utilization: 0.5,
    holder: 'j-run',
    holder_user: 'ann',
    holder_name: 'bert',
    external_processes: [],
    healthy: true,
    drained: false
  },
  { id: '1', index: 1, name: 'Simulated GPU', utilization: null, healthy: true, drained: false },
  {
    id: '2',
    index: 2,
    name: 'Simulated GPU',
    holder: 'j-run',
    holder_user: 'ann',
    healthy: true,
    drained: true
  },
  { id: '3', index: 3, name: 'Simulated GPU', healthy: true, drained: true },
  {
    id: '4',
    index: 4,
    name: 'Simulated GPU',
    external_processes: [
      { pid: 7, user: 'eve' },
      { pid: 8, user: null }
    ],
    healthy: false,
    drained: false
  }
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
    reason: 'running: holds 2 of 4 GPUs',
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
