/** Documents as the API answers them, for the tests (typed by the API's generated types). */
import { GpuView } from '../src/api-types';
import { IJob } from '../src/types';

export const GPU = (index: number, extra: Partial<GpuView> = {}): GpuView => ({
  id: String(index),
  index,
  node: 'box',
  name: 'Simulated GPU',
  kind: 'simulated',
  uuid: null,
  memory_total_mb: 16384,
  memory_used_mb: 1024,
  utilization: 0.5,
  holder: null,
  holder_user: null,
  holder_name: null,
  external_processes: [],
  healthy: true,
  ...extra
});

export const JOB = (id: string, extra: Partial<IJob> = {}): IJob => ({
  id,
  name: id,
  user: 'ann',
  state: 'queued',
  gpus: [],
  min_gpus: 1,
  max_gpus: 2,
  position: 1,
  reason: 'waiting',
  ...extra
});
