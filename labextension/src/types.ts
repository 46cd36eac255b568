/**
 * The shapes of the REST API (docs/api.md, jupyter_elastic_gpu/server/openapi.yaml) as the
 * front end reads them. Fields a server may not send yet (an older server, another user's
 * job) are optional: every reader copes with their absence.
 */

/** A job's state, as the API spells it (`JobState` of the OpenAPI document). */
export type JobState =
  'queued' | 'starting' | 'running' | 'resizing' | 'stopping' | 'done' | 'failed' | 'cancelled';

/** States after which a job never changes again. */
export const FINAL_STATES: ReadonlySet<string> = new Set(['done', 'failed', 'cancelled']);

export function isFinal(state: string): boolean {
  return FINAL_STATES.has(state);
}

export interface IWhoami {
  user: string;
  admin: boolean;
  mode?: 'embedded' | 'daemon' | 'hub';
}

export interface IGpuProcess {
  pid: number;
  user?: string | null;
  memory_mb?: number | null;
  command?: string | null;
}

export interface IGpu {
  id: string;
  index: number;
  node?: string;
  name?: string;
  uuid?: string | null;
  memory_total_mb?: number | null;
  memory_used_mb?: number | null;
  utilization?: number | null;
  holder?: string | null;
  holder_user?: string | null;
  holder_name?: string | null;
  external_processes?: IGpuProcess[];
  healthy?: boolean;
  /** Drained by an admin for maintenance: no job gets it, jobs on it move off. */
  drained?: boolean;
}

export type GpuSource = 'nvml' | 'simulated';

export interface IGpuInventory {
  source: GpuSource;
  gpus: IGpu[];
  /** Why usable GPUs get no job, with the figures (null: none idle, or an older server). */
  idle?: string | null;
}

export interface IJobProgress {
  epoch?: number | null;
  epochs?: number | null;
  step?: number | null;
  steps_per_epoch?: number | null;
  global_step?: number | null;
  samples?: number | null;
  replicas?: number | null;
  loss?: number | null;
  samples_per_s?: number | null;
  fraction?: number | null;
}

export interface ILeaseChange {
  t: number;
  gpus: string[];
  why: string;
}

export interface IJobError {
  type: string;
  message: string;
  traceback?: string | null;
  hint?: string | null;
}

/**
 * A job as the panel knows it: the owner's full view (`Job`), another user's public view
 * (`PublicJob`), merged with its queue entry (`QueueEntry`: reason, estimated start).
 */
export interface IJob {
  id: string;
  user: string;
  state: JobState | string;
  name?: string | null;
  kind?: string;
  gpus?: string[];
  /** The lease's generation: one more at every start, resize and stop. */
  generation?: number;
  min_gpus?: number;
  max_gpus?: number;
  requested_gpus?: number;
  position?: number | null;
  reason?: string | null;
  /** Epoch seconds when the scheduler expects a queued job to start (own jobs only). */
  estimated_start?: number | null;
  /** Epoch seconds when the scheduler expects the job to finish (own jobs only). */
  estimated_end?: number | null;
  /**
   * True while the job's end is not told yet (its pace has not settled: core/eta.py):
   * `eta_s` and `estimated_end` are null, and the card says "estimating…".
   */
  estimating?: boolean;
  submitted_at?: number;
  started_at?: number | null;
  finished_at?: number | null;
  progress?: IJobProgress | null;
  eta_s?: number | null;
  resizes?: number;
  history?: ILeaseChange[];
  restarts?: number;
  error?: IJobError | null;
  exit_code?: number | null;
  model_path?: string | null;
  epochs?: number | null;
  /** Path of the notebook that submitted the job, relative to the server's root. */
  notebook?: string | null;
  /** Suspended and held: it gets no GPUs until resumed. */
  held?: boolean;
  /** Its weight in the policy's order (own jobs, or an admin's view). */
  priority?: number;
}

export interface IQueueEntry extends IJob {
  position: number | null;
  reason: string;
}

export interface IProgressRecord {
  t: number;
  generation?: number | null;
  replicas?: number | null;
  epoch?: number | null;
  epochs?: number | null;
  step_in_epoch?: number | null;
  steps_per_epoch?: number | null;
  global_step?: number | null;
  loss?: number | null;
  first?: boolean | null;
}

export interface ILogs {
  trainer: string;
  sidecar: string;
}

/** One user's fair share (`ShareUser` of `GET admin/shares`). */
export interface IShareUser {
  user: string;
  groups: string[];
  weight: number;
  share: number;
  entitled_gpus: number;
  gpus: number;
  usage_gpu_s: number;
  usage_fraction: number;
  ratio: number;
}

export interface IShareGroup {
  group: string;
  weight: number;
  users: string[];
  gpus: number;
  usage_fraction: number;
}

/** Fair share between users and groups, for admins (`Shares`). */
export interface IShares {
  half_life_s: number;
  gpus: number;
  users: IShareUser[];
  groups: IShareGroup[];
}

/** Why the panel shows a message instead of data (`data-panel-message`). */
export type PanelProblem = 'no-gpus' | 'not-enabled' | 'unavailable' | 'unauthorized';
