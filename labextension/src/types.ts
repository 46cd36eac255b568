/**
 * The shapes of the REST API as the front end reads them: the generated types of the
 * scheduler's models (`api-types.ts`), under the names the panel's code uses.
 */
import {
  ErrorInfo,
  GpuProcessView,
  Gpus,
  GpuView,
  MigSliceView,
  IdleCause,
  JobProgress,
  JobRef,
  JobState,
  JobView,
  GrantChange,
  Logs,
  ProgressRecord,
  PublicJob,
  QueueEntry,
  ReasonFigures,
  ReasonKind,
  ShareGroup,
  Shares,
  ShareUser,
  Whoami
} from './api-types';

export type { JobState, ReasonKind };

/** States after which a job never changes again. */
export const FINAL_STATES: ReadonlySet<string> = new Set(['done', 'failed', 'cancelled']);

export function isFinal(state: string): boolean {
  return FINAL_STATES.has(state);
}

export type IWhoami = Whoami;
export type IGpuProcess = GpuProcessView;
export type IGpu = GpuView;
export type IMigSlice = MigSliceView;
export type GpuSource = Gpus['source'];
export type IGpuInventory = Gpus;
export type IJobProgress = JobProgress;
export type IGrantChange = GrantChange;
export type IJobError = ErrorInfo;
export type IQueueEntry = QueueEntry;
export type IProgressRecord = ProgressRecord;
export type ILogs = Logs;
/** Reasons as data: front ends tell them apart by kind, never by their words (reasons.ts). */
export type IReasonFigures = ReasonFigures;
export type IJobRef = JobRef;
export type IIdleCause = IdleCause;

/** Every field of `A` and of `B`, each optional, of the type either gives it. */
type Either<A, B> = {
  [K in keyof A | keyof B]?:
    (K extends keyof A ? A[K] : never) | (K extends keyof B ? B[K] : never);
};

/** What a job's public view (`PublicJob`) always has. */
type Known = 'id' | 'user' | 'state';

/**
 * A job as the panel knows it: its id, owner and state, and whatever else another user's
 * public view (`PublicJob`), the owner's full view (`JobView`) or its queue entry
 * (`QueueEntry`: reason, estimated start) tell of it.
 */
export type IJob = Pick<PublicJob, Known> &
  Either<Omit<JobView, Known>, Either<Omit<PublicJob, Known>, Omit<QueueEntry, Known>>>;

/** One user's fair share (`ShareUser` of `GET admin/shares`). */
export type IShareUser = ShareUser;
export type IShareGroup = ShareGroup;
export type IShares = Shares;

/** Why the panel shows a message instead of data (`data-panel-message`). */
export type PanelProblem = 'no-gpus' | 'not-enabled' | 'unavailable' | 'unauthorized';
