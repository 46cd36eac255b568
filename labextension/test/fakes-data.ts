/** Documents as the API answers them, for the tests. */

export const GPU = (index: number, extra: Record<string, unknown> = {}) => ({
  id: String(index),
  index,
  node: 'box',
  name: 'Simulated GPU',
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

export const JOB = (id: string, extra: Record<string, unknown> = {}) => ({
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
