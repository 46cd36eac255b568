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

/**
 * What kind of reason a `reason` is (`ReasonKind` of core/reason_kinds.py, which documents
 * each): front ends tell reasons apart by it, never by the words.
 */
export type ReasonKind =
  | 'new'
  | 'waiting'
  | 'running'
  | 'at_maximum'
  | 'kept'
  | 'critical'
  | 'crowded'
  | 'no_faster'
  | 'resize_would_not_pay'
  | 'resized'
  | 'limited'
  | 'waiting_for_server'
  | 'starting'
  | 'resuming'
  | 'resizing'
  | 'held'
  | 'suspended'
  | 'unheld'
  | 'cancelling'
  | 'cancelled'
  | 'done'
  | 'failed'
  | 'requeued'
  | 'kernel'
  | 'idle_warning'
  | 'released'
  | 'kernel_ended'
  | 'public'
  | 'idle';

/** Why a job holding GPUs comes before a waiting one. */
export type Ahead =
  | 'critical'
  | 'shorter'
  | 'waited'
  | 'priority'
  | 'running'
  | 'earlier'
  | 'less_left'
  | 'less_service'
  | 'less_weighted';

/** A job a reason mentions: its id, its name where the reader may see it. */
export interface IJobRef {
  id: string;
  name?: string | null;
  ahead?: Ahead | null;
  /** The job a shrink made room for starts now (false: it grows). */
  starts?: boolean | null;
}

/** Fair share's figures (a `limited` reason). */
export interface IShareFigures {
  user: string;
  due: number;
  total: number;
  weight: number;
  weights: number;
  over?: string | null;
  ratio?: number | null;
  half_life_s?: number | null;
}

/** One job's part in leaving GPUs idle; no figures for a reader who may not see the job. */
export interface IIdleCause {
  job: IJobRef;
  kind: ReasonKind;
  figures?: IReasonFigures | null;
  public?: boolean | null;
}

/**
 * The numbers and jobs behind a reason (`ReasonFigures` of models/responses.py): `reason` is
 * their text, which `reasons.ts` makes from them too.
 */
export interface IReasonFigures {
  gpus?: number | null;
  top?: number | null;
  held?: number | null;
  needs?: number | null;
  free?: number | null;
  suspended?: boolean | null;
  holders?: IJobRef[] | null;
  others?: number | null;
  because?: 'in_progress' | 'finishing' | 'resized' | 'started' | null;
  left_s?: number | null;
  cost_s?: number | null;
  hold_s?: number | null;
  changed_at?: number | null;
  to?: number | null;
  gain_s?: number | null;
  need_s?: number | null;
  change_s?: number | null;
  for_job?: IJobRef | null;
  user?: string | null;
  cap?: number | null;
  share?: IShareFigures | null;
  start_in_s?: number | null;
  start_after?: IJobRef | null;
  causes?: IIdleCause[] | null;
  at?: number | null;
  by?: string | null;
  admin?: boolean | null;
  job_id?: string | null;
  stopping?: boolean | null;
  died?: boolean | null;
  withdrawn?: boolean | null;
  state?: JobState | null;
  for_others?: boolean | null;
  silent_s?: number | null;
  /** When a kernel's lease is released, and how long its kernel has run nothing. */
  release_in_s?: number | null;
  idle_s?: number | null;
  detail?: string | null;
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
}

export type GpuSource = 'nvml' | 'simulated';

export interface IGpuInventory {
  source: GpuSource;
  gpus: IGpu[];
  /** Why usable GPUs get no job, with the figures (null: none idle, or an older server). */
  idle?: string | null;
  idle_kind?: ReasonKind | null;
  idle_figures?: IReasonFigures | null;
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
  why_kind?: ReasonKind | null;
  why_figures?: IReasonFigures | null;
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
  reason_kind?: ReasonKind | null;
  reason_figures?: IReasonFigures | null;
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

/** Why the panel shows a message instead of data (`data-panel-message`). */
export type PanelProblem = 'no-gpus' | 'not-enabled' | 'unavailable' | 'unauthorized';
