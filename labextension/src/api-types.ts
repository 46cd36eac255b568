/**
 * The REST API's types, generated from the scheduler's models (the schemas of
 * jupyter_elastic_gpu/server/openapi.yaml) by `make generate`: do not edit; change
 * the models (jupyter_elastic_gpu/models/) and run it again.
 */

/** What a resize keeps constant (docs/sidecar.md). */
export type BatchPolicy = 'keep-global' | 'keep-per-replica';

/**
 * The body of `POST jobs/ID/cancel` (optional): `force` ends the job's processes at once instead of
 * asking its sidecar to checkpoint and stop (its owner or an admin).
 */
export interface CancelRequest {
  /** End its processes at once instead of asking for a checkpoint. */
  force?: boolean;
}

/**
 * The body of `POST gpus/ID/drain` (admins): true drains the GPU, false puts it back; `force` ends
 * the jobs on it at once instead of asking them to move off.
 */
export interface DrainChange {
  drained: boolean;
  /** End the jobs on it at once instead of asking them to move off. */
  force?: boolean;
}

export interface ErrorBody {
  /** One sentence saying what was wrong and what to do. */
  message: string;
  reason?: string | null;
}

/** Why a job failed: the exception, its traceback, and what to do. */
export interface ErrorInfo {
  /** Exception type, or e.g. `TrainerCrashed`, `SidecarLost`. */
  type: string;
  message?: string;
  traceback?: string | null;
  /** What to do about it. */
  hint?: string | null;
}

export interface Event {
  seq: number;
  /** Null for scheduler-wide events. */
  job_id: string | null;
  /** Epoch seconds. */
  t: number;
  kind: EventKind;
  /** The change and its reason */
  message: string;
  /** Details, e.g. `{"gpus", "generation"}` or `{"from", "to", "generation"}`. */
  data: Record<string, unknown> | null;
}

/** What an entry of a job's event log records (`GET jobs/ID/events`). */
export type EventKind =
  | 'submitted'
  | 'admitted'
  | 'resumed'
  | 'running'
  | 'resize'
  | 'suspend'
  | 'suspended'
  | 'lost'
  | 'cancel'
  | 'done'
  | 'failed'
  | 'cancelled'
  | 'restart'
  | 'quarantined'
  | 'hold'
  | 'release'
  | 'priority'
  | 'drain'
  | 'kept'
  | 'expired'
  | 'deadline';

export interface Events {
  events: Event[];
}

/**
 * A job that expired (`SchedulerService.job_retention_days`) whose directory its owner's side
 * removes: the shared scheduler never touches job files itself.
 */
export interface Expired {
  id: string;
  job_dir: string;
}

/** The answer of `POST launches/removed`: the expired jobs no longer listed. */
export interface Forgotten {
  jobs: string[];
}

/**
 * Which framework adapter runs a script job (docs/frameworks.md); `auto`: read from the script's
 * imports (`frameworks.detect`).
 */
export type Framework = 'auto' | 'keras' | 'lightning' | 'transformers' | 'torchrun';

export interface GpuProcessView {
  pid: number;
  user: string | null;
  /** MiB */
  memory_mb: number | null;
  command: string | null;
}

export interface GpuView {
  id: string;
  index: number;
  /** Host name. */
  node: string;
  /** Model name (`Simulated GPU` for simulated ones). */
  name: string;
  /**
   * What kind of GPU it is, as the scheduler tells kinds apart: the model without the vendor's
   * words (`A100-SXM4-80GB`, `T4`), the kind a simulated GPU was described as (`simulated_gpus =
   * "2xA100-80GB,2xT4"`), or `simulated`.
   */
  kind: string;
  uuid: string | null;
  memory_total_mb: number | null;
  memory_used_mb: number | null;
  utilization: number | null;
  /** Id of the job holding the GPU. */
  holder: string | null;
  holder_user: string | null;
  /** Name of the holding job; null when it belongs to another user. */
  holder_name: string | null;
  /** Processes on this GPU that the scheduler did not start. */
  external_processes: GpuProcessView[];
  /**
   * False while processes outside the scheduler use the GPU; the scheduler then leaves it alone.
   */
  healthy: boolean;
  /** drained by an admin for maintenance: no job gets it, jobs on it move off */
  drained?: boolean;
  /**
   * Its MIG instances, where MIG mode is on (null: off, or not supported). CUDA sees the instances,
   * not one GPU, so no job is placed on a GPU in MIG mode; the scheduler never changes a GPU's MIG
   * layout.
   */
  mig?: MigSliceView[] | null;
}

export interface Gpus {
  source: 'nvml' | 'simulated';
  gpus: GpuView[];
  /**
   * why usable GPUs stay idle, with the figures behind it ("2 GPUs idle: growing 'resnet' to 4
   * would save ~5 s, a resize costs ~8 s"); null when none is
   */
  idle?: string | null;
  /** 'idle' when 'idle' is said: the idle line as a reason_kind */
  idle_kind?: ReasonKind | null;
  /** the figures behind 'idle' (gpus, at, causes: each job's kind and figures) */
  idle_figures?: ReasonFigures | null;
}

export type GrantAction = 'run' | 'stop' | 'cancel';

export interface GrantChange {
  /** Epoch seconds. */
  t: number;
  gpus: string[];
  why: string;
  /** 'why' as a reason_kind */
  why_kind?: ReasonKind | null;
  /** 'why''s figures */
  why_figures?: ReasonFigures | null;
}

/** The grant a sidecar is told to run on (its answer to a heartbeat). */
export interface GrantView {
  /** Increases with every new grant. */
  generation: number;
  gpus: string[];
  action: GrantAction;
}

/** `PUT admin/groups/{group}/weight`: a group's fair-share weight (default 1). */
export interface GroupWeightRequest {
  /** The group's fair-share weight (groups never set weigh 1). */
  weight: number;
}

/** What a sidecar posts every few seconds (docs/sidecar.md, "Heartbeat protocol"). */
export interface Heartbeat {
  job_id?: string | null;
  /** Generation of the grant the current (or last) trainer runs on. */
  generation?: number | null;
  gpus?: string[];
  state?: SidecarState | null;
  progress?: ProgressRecord | null;
  /** records before `progress` not acknowledged yet, oldest first */
  backlog?: ProgressRecord[];
  /** Samples/s per replica count, the median of the last 10 measurements. */
  throughput?: Record<string, number>;
  /** Mean measured resize pause. */
  resize_cost_s?: number | null;
  sidecar_pid?: number | null;
  trainer_pid?: number | null;
  restarts?: number;
  error?: ErrorInfo | null;
  exit_code?: number | null;
  /** The saved model */
  model_path?: string | null;
  /**
   * interactive leases: seconds since the kernel last ran code (null: not known, never reclaimed
   * for idleness)
   */
  idle_s?: number | null;
}

/** One job's part in leaving GPUs idle; no figures when the reader may not see the job. */
export interface IdleCause {
  job: JobRef;
  kind: ReasonKind;
  figures?: ReasonFigures | null;
  public?: boolean | null;
}

export type JobKind = 'script' | 'synthetic' | 'interactive';

export interface JobList {
  jobs: (JobView | PublicJob)[];
  /**
   * finished jobs that match the filter but were left out by its time window (the most recent of
   * each user, or 'since'): 'all=true' lists them
   */
  hidden?: number;
}

/** The job's last progress record, condensed. */
export interface JobProgress {
  /** 0-based epoch in progress. */
  epoch?: number | null;
  epochs?: number | null;
  /** Batches done in this epoch. */
  step?: number | null;
  steps_per_epoch?: number | null;
  global_step?: number | null;
  samples?: number | null;
  replicas?: number | null;
  loss?: number | null;
  metrics?: Record<string, number | null>;
  samples_per_s?: number | null;
  /** The global batch of the last step. */
  batch_size?: number | null;
  /**
   * The gradient noise scale in samples (jobs that measure it): a batch of B samples makes
   * noise_scale / (noise_scale + B) of the use of each sample that a small batch makes.
   */
  noise_scale?: number | null;
  /** The pairs of steps measured (one in 8) that the noise scale is from. */
  noise_steps?: number | null;
  /** Share of the total work done, where the total is known. */
  fraction?: number | null;
  /**
   * What the framework's adapter says of the run (a setting of the script's that the grant
   * overrides, a batch policy it cannot honour as asked).
   */
  note?: string | null;
}

/** A job a reason mentions: its id, and its name where the reader may see it. */
export interface JobRef {
  id: string;
  name?: string | null;
  /** why it holds GPUs before a waiting job */
  ahead?:
    | 'critical'
    | 'shorter'
    | 'waited'
    | 'priority'
    | 'running'
    | 'earlier'
    | 'less_left'
    | 'less_service'
    | 'less_weighted'
    | null;
  /** the job a shrink made room for starts now (false: it grows) */
  starts?: boolean | null;
}

/** A job as the scheduler sees it (docs/api.md). */
export type JobState =
  'queued' | 'starting' | 'running' | 'resizing' | 'stopping' | 'done' | 'failed' | 'cancelled';

/** A job as its owner (or an admin) sees it. */
export interface JobView {
  id: string;
  name: string;
  user: string;
  state: JobState;
  kind: JobKind;
  /** GPUs the job holds now. */
  gpus: string[];
  /** Generation of the desired grant. */
  generation: number;
  min_gpus: number;
  max_gpus: number;
  requested_gpus: number;
  reason: string;
  /**
   * what kind of reason 'reason' is, for front ends to tell reasons apart without reading the text
   * (core/reason_kinds.py documents each value; 'reason_figures' holds its figures)
   */
  reason_kind?: ReasonKind;
  /**
   * the numbers and jobs behind 'reason': 'reason' is their text (core/reason_text.py, and the lab
   * extension's reasons.ts, make the same text from reason_kind and these)
   */
  reason_figures?: ReasonFigures;
  /** Place in the queue while queued. */
  position: number | null;
  /** Epoch seconds. */
  submitted_at: number;
  /** First time its trainer ran. */
  started_at: number | null;
  finished_at: number | null;
  progress: JobProgress | null;
  /** Seconds to finish at the current speed; null while `estimating`. */
  eta_s: number | null;
  /**
   * true while the job's end is not told yet: its pace has not settled (too few progress records,
   * over too short a time, or their predicted ends still disagree; the rule is core/eta.py), so
   * eta_s and estimated_end are null and front ends say 'estimating...'; false for finished jobs
   * and kernels' leases
   */
  estimating?: boolean;
  /** Measured samples/s per GPU count (keys are counts as strings). */
  throughput: Record<string, number>;
  /**
   * The same per kind of GPU where kinds are mixed (`{"T4": {"2": 180.0}}`): what placement weighs
   * (the fast kind to the job that gains most from it).
   */
  throughput_by_kind?: Record<string, Record<string, number>>;
  /** Mean measured resize pause. */
  resize_cost_s: number | null;
  resizes: number;
  /** The last 50 grant changes. */
  history: GrantChange[];
  restarts: number;
  error: ErrorInfo | null;
  exit_code: number | null;
  model_path: string | null;
  job_dir: string;
  epochs: number | null;
  batch_policy: BatchPolicy;
  /** the job measures its gradient noise scale */
  measure_noise?: boolean;
  /** the MIG profile it runs on one instance of (null: whole GPUs) */
  mig?: string | null;
  /**
   * the framework adapter that runs the script, as settled at submission (never `auto`); null for a
   * synthetic job or a kernel's lease
   */
  framework?: Framework | null;
  /**
   * whether the GPU count may change while it runs: false when its framework cannot resize the
   * script (it runs at `requested_gpus` throughout, and `notes` says why); null for a job without a
   * framework
   */
  elastic?: boolean | null;
  priority: number;
  /**
   * suspended by a person (its owner or an admin): it gets no GPUs until resumed (POST
   * jobs/ID/resume)
   */
  held?: boolean;
  /**
   * what the scheduler changed in the request (counts above the server's, a script that runs at one
   * GPU count and why)
   */
  notes?: string[];
  /** the notebook that submitted it, relative to the server's root */
  notebook?: string | null;
  /** kept past the retention: once finished, it never expires (POST jobs/ID/keep) */
  kept?: boolean;
}

/** The change of `JobList.jobs`. */
export interface JobsDelta {
  /** Ids of entries gone (a job that left the queue, or a finished job past `recent_jobs`). */
  removed?: string[] | null;
  /** Every id in the new order, when applying `removed` and `changed` does not give it. */
  order?: string[] | null;
  /** Entries new or different, whole. */
  changed?: (JobView | PublicJob)[] | null;
}

/**
 * The body of `POST jobs/ID/keep`: true keeps the finished job (its record and its files) past the
 * retention (`SchedulerService.job_retention_days`); false lets it expire again.
 */
export interface KeepChange {
  kept: boolean;
}

/** The answer to `POST kernels/ID/lease`: the kernel restarts with these GPUs. */
export interface KernelLease {
  kernel_id: string;
  /** the lease's job id (null: no GPUs) */
  lease: string | null;
  gpus: string[];
  message: string;
}

/**
 * The body of `POST kernels/ID/lease` (`%gpu_lease`): the GPUs the running kernel should have (0:
 * give its lease back).
 */
export interface KernelLeaseRequest {
  /** GPUs the kernel should have (0: give its lease back). */
  gpus: number;
  /** A MIG profile (`1g.10gb`): one MIG instance of it instead (gpus 1). */
  mig?: string | null;
}

/** Everything needed to start one sidecar; a user's server gets it in shared mode. */
export interface LaunchRequest {
  job_id: string;
  job_dir: string;
  /** The submitted request as stored, defaults filled in. */
  spec: SubmitRequest;
  gpus: string[];
  generation: number;
  simulated: boolean;
  heartbeat_url: string;
  /** Seconds between heartbeats. */
  heartbeat_interval: number;
  /** The job's secret, for `ELASTIC_GPU_JOB_SECRET`. */
  secret: string;
  mechanism?: Mechanism;
  /** Seconds between periodic checkpoints. */
  checkpoint_interval: number;
}

export interface Launches {
  launches: LaunchRequest[];
  /**
   * the caller's expired jobs whose directories are still to be removed: the caller's server
   * removes each, then says so (POST launches/removed)
   */
  expired?: Expired[];
  /**
   * the caller's jobs whose claim on GPUs was voided: the caller's server ends every process it
   * started for them
   */
  ended?: string[];
}

/**
 * The answer to `POST leases`: the lease (a job of kind `interactive`) and what its kernel's
 * provisioner heartbeats with. The secret is shown this once.
 */
export interface LeaseGrant {
  job: JobView;
  /** The lease's heartbeat secret (`Authorization: Bearer`), shown this once. */
  secret: string;
  /** Where the provisioner heartbeats. */
  heartbeat_url: string;
  /** Seconds between heartbeats. */
  heartbeat_interval: number;
}

/**
 * The body of `POST leases`: GPUs for a notebook kernel (docs/interactive-gpus.md). A lease is a
 * job of kind `interactive` of exactly `gpus` GPUs: admitted like a non-elastic job of that size,
 * never resized or checkpointed, held while its kernel lives.
 */
export interface LeaseRequest {
  /** The GPUs the kernel gets (required, but for `mig`: 1). */
  gpus?: number | null;
  /** A MIG profile (`1g.10gb`): the kernel gets one MIG instance of it instead of whole GPUs. */
  mig?: string | null;
  /** 1-80 letters, digits, spaces, '.', '_' or '-'. */
  name?: string | null;
  /** The notebook the kernel runs */
  notebook?: string | null;
}

export interface Logs {
  trainer: string;
  sidecar: string;
}

/** How a running job changes GPUs. */
export type Mechanism = 'sidecar' | 'termination';

export interface MigSliceView {
  /** What CUDA_VISIBLE_DEVICES names it by (`MIG-...`). */
  uuid: string;
  /** Its MIG profile, e.g. `1g.10gb`. */
  profile: string;
  memory_total_mb: number | null;
  memory_used_mb: number | null;
  /**
   * 0..1: how busy its engines were since the last inventory read, from NVML's GPU performance
   * monitoring (Hopper and later); null where NVML reports none.
   */
  utilization?: number | null;
  /** Id of the lease or job holding the slice. */
  holder?: string | null;
  holder_user?: string | null;
  /** Name of the holding lease or job; null when it is another user's. */
  holder_name?: string | null;
}

/**
 * Every later message of `ws?view=panel`: only what changed since the previous one; none of `gpus`,
 * `queue`, `jobs` when the state moved on without a change the caller sees (the panel is then
 * current at `version`).
 */
export interface PanelDelta {
  type: 'delta';
  version: number;
  /** The whole GPU document, when it changed. */
  gpus?: Gpus | null;
  queue?: QueueDelta | null;
  jobs?: JobsDelta | null;
}

/**
 * The first message of `ws?view=panel`: what `GET gpus`, `GET queue` and `GET jobs` answer the
 * caller.
 */
export interface PanelSnapshot {
  type: 'snapshot';
  version: number;
  gpus: Gpus;
  queue: Queue;
  jobs: JobList;
}

/**
 * The body of `POST jobs/ID/priority` (admins): the job's new priority, a number as `POST jobs`
 * takes it (not a string or a boolean).
 */
export interface PriorityChange {
  priority: number;
}

export interface ProgressList {
  progress: ProgressRecord[];
}

/** One line of a job's `progress.jsonl`, written by its trainer (docs/sidecar.md). */
export interface ProgressRecord {
  /** Epoch seconds. */
  t: number;
  generation?: number | null;
  replicas?: number | null;
  /** 0-based epoch in progress. */
  epoch?: number | null;
  epochs?: number | null;
  step_in_epoch?: number | null;
  steps_per_epoch?: number | null;
  global_step?: number | null;
  /** Cumulative over the job. */
  samples?: number | null;
  loss?: number | null;
  metrics?: Record<string, number | null>;
  samples_per_s?: number | null;
  /** The global batch. */
  batch_size?: number | null;
  /** |G|^2, the true gradient's squared norm (estimated; --measure-noise). */
  grad_sqr?: number | null;
  /** tr(Sigma), the per-sample gradient variance (estimated). */
  grad_var?: number | null;
  /** The gradient noise scale tr(Sigma) / |G|^2, in samples. */
  noise_scale?: number | null;
  /** The pairs of steps measured that the noise scale is from. */
  noise_steps?: number | null;
  /** First step of a trainer process. */
  first?: boolean | null;
  pid?: number | null;
  /** Global step restored. */
  resumed_from?: number | null;
  /** Steps replayed because the input cannot be skipped. */
  replayed?: number | null;
  /** Unix time the trainer process had its framework imported (first step only). */
  ready_at?: number | null;
  epoch_end?: boolean | null;
  /** Written just before a stop. */
  stopped?: boolean | null;
  /**
   * What the framework's adapter says of this run: a setting of the script's that the grant
   * overrides, or a batch policy it cannot honour as asked.
   */
  note?: string | null;
}

/** Another user's job, as everyone may see it: owner, size and state. */
export interface PublicJob {
  id: string;
  user: string;
  state: JobState;
  gpus: string[];
  min_gpus: number;
  max_gpus: number;
  position: number | null;
}

export interface Queue {
  queue: QueueEntry[];
}

/** The change of `Queue.queue`. */
export interface QueueDelta {
  /** Ids of entries gone (a job that left the queue, or a finished job past `recent_jobs`). */
  removed?: string[] | null;
  /** Every id in the new order, when applying `removed` and `changed` does not give it. */
  order?: string[] | null;
  /** Entries new or different, whole. */
  changed?: QueueEntry[] | null;
}

/** An open job in queue order; `name` and the estimates only for the caller's own jobs. */
export interface QueueEntry {
  id: string;
  user: string;
  state: JobState;
  gpus: string[];
  min_gpus: number;
  max_gpus: number;
  position: number | null;
  reason: string;
  /**
   * what kind of reason 'reason' is, for front ends to tell reasons apart without reading the text
   * (core/reason_kinds.py documents each value; 'reason_figures' holds its figures)
   */
  reason_kind?: ReasonKind;
  /**
   * the numbers and jobs behind 'reason': 'reason' is their text (core/reason_text.py, and the lab
   * extension's reasons.ts, make the same text from reason_kind and these)
   */
  reason_figures?: ReasonFigures;
  name?: string | null;
  /**
   * when a job that holds no GPUs gets them (epoch seconds), from the policy run forward on the
   * current state; null when it holds GPUs or nothing can be said (it can never fit, or its start
   * lies past the forecast's horizon)
   */
  estimated_start?: number | null;
  /** when it finishes (epoch seconds), from the same forward run; null while 'estimating' */
  estimated_end?: number | null;
  /**
   * true while the job's end is not told yet: its pace has not settled (too few progress records,
   * over too short a time, or their predicted ends still disagree; the rule is core/eta.py), so
   * eta_s and estimated_end are null and front ends say 'estimating...'; false for finished jobs
   * and kernels' leases
   */
  estimating?: boolean;
  /**
   * why a job of the caller's lacks an estimate: the bound that stopped the forward run before it:
   * 'jobs' (not among the forecast_jobs it plays), 'time' (its forecast_budget ran out, or the
   * forecast of the current state was not ready within it), 'decisions', 'horizon'; null when its
   * estimates are whole or nothing can be said
   */
  estimate_limit?: 'jobs' | 'time' | 'decisions' | 'horizon' | null;
}

/**
 * The figures behind a reason; each kind uses those `ReasonKind` says (core/reason_kinds.py). Times
 * in seconds, `at` and `changed_at` epoch seconds.
 */
export interface ReasonFigures {
  /** GPUs it holds or gets (a resize's 'to') */
  gpus?: number | null;
  /** its maximum */
  top?: number | null;
  /** GPUs it held before a resize ('from') */
  held?: number | null;
  needs?: number | null;
  free?: number | null;
  suspended?: boolean | null;
  /** the jobs that hold the GPUs it waits for */
  holders?: JobRef[] | null;
  /** more holders, not named */
  others?: number | null;
  /** why a kept grant is kept */
  because?: 'in_progress' | 'finishing' | 'resized' | 'started' | null;
  left_s?: number | null;
  /** what a resize costs it */
  cost_s?: number | null;
  /** how long it is left alone after a change */
  hold_s?: number | null;
  changed_at?: number | null;
  /** the size growing would take it to */
  to?: number | null;
  gain_s?: number | null;
  need_s?: number | null;
  /** time left saved (<0: added) by a resize */
  change_s?: number | null;
  /** the job a shrink made room for */
  for_job?: JobRef | null;
  user?: string | null;
  /** the per-user GPU cap */
  cap?: number | null;
  share?: ShareFigures | null;
  /** when a queued job should start */
  start_in_s?: number | null;
  /** the job whose end it starts at */
  start_after?: JobRef | null;
  /** the kind of GPU it starts on, where kinds are mixed */
  start_kind?: string | null;
  causes?: IdleCause[] | null;
  /** when the idle line was said */
  at?: number | null;
  /** who held, resumed or cancelled it */
  by?: string | null;
  admin?: boolean | null;
  job_id?: string | null;
  stopping?: boolean | null;
  died?: boolean | null;
  withdrawn?: boolean | null;
  state?: JobState | null;
  for_others?: boolean | null;
  silent_s?: number | null;
  /** when a kernel's lease is released */
  release_in_s?: number | null;
  /** how long a kernel has run nothing */
  idle_s?: number | null;
  detail?: string | null;
  /** the most free GPUs together (on one server, of one kind) */
  widest?: number | null;
  /** free GPUs by kind: `1 A100-80GB, 1 T4` */
  kinds?: string | null;
  /** the MIG profile a lease asks for or holds */
  profile?: string | null;
  /** the MIG instances of that profile there are */
  slices?: number | null;
  /** leases waiting for one before this one */
  before?: number | null;
  /** the MIG instances of that profile on GPUs an admin drained */
  drained?: number | null;
}

/** Why a job has what it has (a job's `reason_kind`), or why GPUs sit idle. */
export type ReasonKind =
  | 'new'
  | 'waiting'
  | 'spread'
  | 'mig_slice'
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

/**
 * The body of `POST launches/removed`: expired jobs of the caller whose directories their server
 * has removed (`Launches.expired`).
 */
export interface Removed {
  jobs: string[];
}

/**
 * Fair share's figures: `user`'s share now (`due` of `total` GPUs, at `weight` of `weights`), and
 * who used more than theirs (`over`, `ratio` times, over the last `half_life_s`).
 */
export interface ShareFigures {
  user: string;
  due: number;
  total: number;
  weight: number;
  weights: number;
  over?: string | null;
  ratio?: number | null;
  half_life_s?: number | null;
}

export interface ShareGroup {
  group: string;
  weight: number;
  users: string[];
  gpus: number;
  usage_fraction: number;
}

/**
 * One user's fair share (`GET admin/shares`): `share` is the fraction of the GPUs due to them now,
 * `ratio` their decayed usage fraction over their weight's fraction (3.0: they used three times
 * their share).
 */
export interface ShareUser {
  user: string;
  /** The user's groups at their latest submission. */
  groups: string[];
  /** The largest weight of the user's groups (1 without any). */
  weight: number;
  /** Fraction (0 to 1) of the GPUs due to this user now. */
  share: number;
  /** Whole GPUs due to this user now. */
  entitled_gpus: number;
  /** GPUs the user's jobs hold now. */
  gpus: number;
  /** GPU-seconds used */
  usage_gpu_s: number;
  /** The user's part of everyone's decayed usage. */
  usage_fraction: number;
  /** usage_fraction over the weight's fraction: 3.0 is three times the share. */
  ratio: number;
}

/** Fair share between users and groups, for admins (docs/policies.md, Fair share). */
export interface Shares {
  /** Seconds after which usage counts half. */
  half_life_s: number;
  /** Usable GPUs. */
  gpus: number;
  users: ShareUser[];
  groups: ShareGroup[];
}

/** What a sidecar reports about its trainer (`status.json` and heartbeats). */
export type SidecarState =
  | 'starting'
  | 'running'
  | 'resizing'
  | 'restarting'
  | 'suspended'
  | 'done'
  | 'failed'
  | 'cancelled';

/** The last message before the socket closes on an error (as `ErrorBody`). */
export interface SocketError {
  type: 'error';
  message: string;
  reason?: string | null;
}

/** Open jobs (and the caller's finished ones) and the GPUs with their holders. */
export interface Status {
  gpus: StatusGpu[];
  jobs: StatusJob[];
  /**
   * finished jobs that match the filter but were left out by its time window (the most recent of
   * each user, or 'since'): 'all=true' lists them
   */
  hidden?: number;
  /**
   * why usable GPUs stay idle, with the figures behind it ("2 GPUs idle: growing 'resnet' to 4
   * would save ~5 s, a resize costs ~8 s"); null when none is
   */
  idle?: string | null;
  /** 'idle' when 'idle' is said: the idle line as a reason_kind */
  idle_kind?: ReasonKind | null;
  /** the figures behind 'idle' (gpus, at, causes: each job's kind and figures) */
  idle_figures?: ReasonFigures | null;
}

export interface StatusGpu {
  id: string;
  /** What kind of GPU it is (as in `GET gpus`). */
  kind?: string;
  holder: string | null;
  /** Its MIG instances and their holders where MIG mode is on. */
  mig?: StatusSlice[] | null;
}

/** One job in the status document; `name` and `reason` only for the caller's own. */
export interface StatusJob {
  id: string;
  name: string | null;
  user: string;
  state: JobState;
  gpus: string[];
  min_gpus: number;
  max_gpus: number;
  progress: StatusProgress;
  reason?: string | null;
  /**
   * what kind of reason 'reason' is, for front ends to tell reasons apart without reading the text
   * (core/reason_kinds.py documents each value; 'reason_figures' holds its figures)
   */
  reason_kind?: ReasonKind | null;
  /**
   * the numbers and jobs behind 'reason': 'reason' is their text (core/reason_text.py, and the lab
   * extension's reasons.ts, make the same text from reason_kind and these)
   */
  reason_figures?: ReasonFigures | null;
}

export interface StatusProgress {
  epoch?: number | null;
  epochs?: number | null;
  step?: number | null;
  replicas?: number | null;
}

/** One MIG instance of a GPU in `status`. */
export interface StatusSlice {
  uuid: string;
  profile: string;
  /** Id of the lease or job on it. */
  holder?: string | null;
}

/**
 * A message of `ws?view=status`: the status document, at once and after every change of state (at
 * least every 25 s).
 */
export interface StatusUpdate {
  type: 'update';
  /** -1 on the first message. */
  version: number;
  status: Status;
}

/**
 * The body of `POST jobs` (docs/api.md), and a job's spec as the scheduler keeps it. Omitted sizes
 * mean what `core.model.gpu_counts` says: `min_gpus` 1, `max_gpus` every GPU of the server (the
 * scheduler shrinks the job when others need GPUs), `requested_gpus` `min_gpus`. `fit_to(total)`
 * settles them, and every job the scheduler keeps is settled.
 */
export interface SubmitRequest {
  name?: string | null;
  kind?: JobKind;
  /** The training code (cell or file source). */
  script?: string | null;
  /** Command-line arguments for the script. */
  args?: string[];
  /** Folder relative paths of the script resolve from. */
  cwd?: string | null;
  min_gpus?: number;
  /**
   * A MIG profile (`1g.10gb`): the job runs on one MIG instance of that profile instead of whole
   * GPUs (one device: its sizes are 1), from the pool of MIG instances (docs/interactive-gpus.md).
   * Refused where no GPU has one.
   */
  mig?: string | null;
  /**
   * Default: every GPU of the server. Above the server's GPUs: lowered to them (see the job's
   * `notes`).
   */
  max_gpus?: number | null;
  /** the count asked for */
  requested_gpus?: number | null;
  /** Overrides `epochs` of every fit() call. */
  epochs?: number | null;
  priority?: number;
  batch_policy?: BatchPolicy;
  /**
   * Measure the gradient noise scale as the job trains (Keras on TensorFlow; docs/sidecar.md): the
   * job's view says which batch sizes use each sample well. Costs one copy of the model's trainable
   * weights in memory.
   */
  measure_noise?: boolean;
  /**
   * The framework adapter that runs the script (docs/frameworks.md): `auto` reads it from the
   * script's imports. A script its framework cannot resize (no framework recognised, or a torchrun
   * script without a checkpoint of its own) runs at one GPU count: `requested_gpus` (see the job's
   * `notes`). Script jobs only.
   */
  framework?: Framework;
  /** Simulated GPUs (logical CPU devices); default: whatever the box has. */
  simulated?: boolean | null;
  /** Pickled variables handed to the script, base64, by Python identifier. */
  inputs?: Record<string, string>;
  synthetic?: SyntheticSpec | null;
  /**
   * the notebook that submits the job, relative to the Jupyter server's root as the file browser
   * names it (e.g. 'projects/mnist.ipynb')
   */
  notebook?: string | null;
}

/** A job without TensorFlow: its steps take the time its speed profile says. */
export interface SyntheticSpec {
  /** samples to process in total */
  work: number;
  /** samples/s at each GPU count */
  throughput: Record<string, number>;
  /** how much faster than real time */
  time_scale?: number;
  batch?: number;
  /**
   * seconds each checkpoint takes to write, as saving a real model does: a stop or a resize waits
   * for it
   */
  save_s?: number;
  /**
   * how fast the job goes on each kind of GPU, relative to the others (`{"A100-80GB": 3, "T4":
   * 1}`): the scheduler's prior where kinds are mixed, until the job measures itself there
   * (simulated GPUs run it at its profile's speed on any kind)
   */
  kind_speed?: Record<string, number>;
}

/**
 * One message of `ws`: `update` for `?view=status`, `snapshot` then `delta` for `?view=panel`,
 * `error` before it closes.
 */
export type UpdateMessage = StatusUpdate | PanelSnapshot | PanelDelta | SocketError;

export interface Updates {
  version: number;
}

export interface Whoami {
  user: string;
  admin: boolean;
  /**
   * `embedded`: the scheduler runs in this server; `daemon`: a shared scheduler answers; `hub`: the
   * JupyterHub service answers.
   */
  mode: 'embedded' | 'daemon' | 'hub';
}
