/**
 * Notifications of the caller's own jobs in JupyterLab's notification centre: started (or
 * resumed), resized (with the scheduler's reason), done (with a button to its result) and
 * failed (with the error). They are level-triggered from the page's model (the push channel):
 * each job's latest milestone is compared with the one last told, which the browser remembers
 * per server and user, so a reload tells nothing twice and a job that ended while no page was
 * open is told once when one opens. Turned off, the memory is forgotten: turned on again, it
 * starts from what is true then, without a burst of old news.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal } from '@lumino/signaling';

import { duration, gpuList, plural } from './format';
import { IProblem } from './model';
import { IPanelData } from './state';
import { minutes, reasonParts, reasonText } from './reasons';
import { IJob, IGrantChange, IReasonFigures, IWhoami, ReasonKind } from './types';

/** What can happen to a job that its owner is told about. */
export type JobEventKind = 'started' | 'resumed' | 'resized' | 'done' | 'failed' | 'idle';

/** A job's latest milestone: told once per job and `key`. */
export interface IJobEvent {
  kind: JobEventKind;
  job: IJob;
  /** Unique among the job's milestones: the kind and the grant generation it happened at. */
  key: string;
  /** GPU counts before and after a resize. */
  from?: number;
  to?: number;
  /** The scheduler's reason for the grant (a start or a resize), its kind and figures. */
  why?: string;
  whyKind?: ReasonKind | null;
  whyFigures?: IReasonFigures | null;
}

/** What a notification's buttons do. */
export type NoticeAction = 'open-notebook' | 'logs' | 'show-queue';

/** A notification, as JupyterLab's `Notification.emit` takes it. */
export interface INotice {
  message: string;
  type: 'info' | 'success' | 'warning' | 'error';
  /** Milliseconds the toast stays; false: until dismissed. */
  autoClose: number | false;
  /** Buttons, the first one the accent. */
  actions: NoticeAction[];
  /** The job it is about (null: a summary of several). */
  job: IJob | null;
}

/** {job id: key of the milestone last told}. */
export type Told = Record<string, string>;

/** More events than this in one update become one summary notification. */
export const MAX_NOTICES_AT_ONCE = 3;

/** JupyterLab truncates a notification's message at 140 characters: keep the end readable. */
const MAX_MESSAGE = 140;

/** How long a toast stays, per kind (ms; the notification centre keeps them all). */
const AUTO_CLOSE: Record<JobEventKind, number | false> = {
  started: 5000,
  resumed: 5000,
  resized: 6000,
  done: 10000,
  failed: false,
  idle: false
};

/**
 * The warning of a notebook kernel's GPU lease about to be released for idleness (its reason
 * says so, docs/interactive-gpus.md), or null. Told apart from the job's milestones: once per
 * warning, again if the kernel is warned again after it ran code.
 */
export function idleWarning(job: IJob): IJobEvent | null {
  if (job.kind !== 'interactive' || job.state !== 'running' || job.reason_kind !== 'idle_warning') {
    return null;
  }
  const generation = job.generation ?? job.history?.length ?? 0;
  const why = { why: job.reason ?? '', whyKind: job.reason_kind, whyFigures: job.reason_figures };
  return { kind: 'idle', job, key: `idle:${generation}`, ...why };
}

/** The memory key of a job's idle warning, beside its milestone's (`job.id`). */
function idleKey(job: IJob): string {
  return `${job.id}#idle`;
}

/** The reason a grant change was made for, as an event carries it. */
function reasonOf(
  change: IGrantChange | undefined
): Pick<IJobEvent, 'why' | 'whyKind' | 'whyFigures'> {
  return { why: change?.why, whyKind: change?.why_kind, whyFigures: change?.why_figures };
}

/**
 * The latest milestone of a job, from its state and its grant history (`history`, one entry
 * per grant: a start, a resize, or an empty one for a stop); null while there is nothing to
 * tell (queued, starting, stopping, cancelled by a person).
 */
export function milestone(job: IJob): IJobEvent | null {
  if (job.state === 'done' || job.state === 'failed') {
    return { kind: job.state, job, key: job.state };
  }
  if (job.state !== 'running' && job.state !== 'resizing') {
    return null;
  }
  const history = job.history ?? [];
  const generation = job.generation ?? history.length;
  const last = history[history.length - 1];
  const before = history[history.length - 2];
  if (last && last.gpus.length && before && before.gpus.length) {
    return {
      kind: 'resized',
      job,
      key: `resized:${generation}`,
      from: before.gpus.length,
      to: last.gpus.length,
      ...reasonOf(last)
    };
  }
  const resumed = history.slice(0, -1).some(change => change.gpus.length > 0);
  const kind = resumed ? 'resumed' : 'started';
  return { kind, job, key: `${kind}:${generation}`, ...reasonOf(last) };
}

/**
 * The milestones of `user`'s jobs not told yet, and what is told once they are. Jobs no
 * longer listed are forgotten (a finished job leaves the list for good).
 */
export function untold(
  told: Told,
  jobs: Iterable<IJob>,
  user: string
): { events: IJobEvent[]; told: Told } {
  const events: IJobEvent[] = [];
  const next: Told = {};
  for (const job of jobs) {
    if (job.user !== user) {
      continue;
    }
    const event = milestone(job);
    if (event && told[job.id] !== event.key) {
      events.push(event);
    }
    const key = event?.key ?? told[job.id];
    if (key !== undefined) {
      next[job.id] = key;
    }
    const warning = idleWarning(job);
    if (warning) {
      if (told[idleKey(job)] !== warning.key) {
        events.push(warning);
      }
      next[idleKey(job)] = warning.key; // forgotten once the warning clears: told again next time
    }
  }
  return { events, told: next };
}

/** A job as a notification names it: `GPU job "mnist"`, or its id when it has no name. */
export function jobLabel(job: IJob): string {
  return job.name ? `GPU job "${job.name}"` : `GPU job ${job.id}`;
}

/** The reasons whose head says the grant itself, which a notification already says. */
const GRANT_LEADS = new Set(['running', 'starting', 'resuming', 'resizing']);

/**
 * What a reason adds after the grant it explains: a `crowded` reason ("running on 2 of up to
 * 4 GPUs: the others help other jobs more") gives "the others help other jobs more". A
 * reason without a kind (from an older scheduler) is kept whole.
 */
export function reasonDetail(
  why: string | null | undefined,
  kind?: ReasonKind | null,
  figures?: IReasonFigures | null
): string {
  if (!kind) {
    return (why ?? '').trim();
  }
  const parts = reasonParts(kind, figures);
  if (parts.detail && parts.lead !== null && GRANT_LEADS.has(parts.lead)) {
    return parts.detail;
  }
  return reasonText(kind, figures);
}

/** The notification of one event. */
export function noticeFor(event: IJobEvent, canOpenNotebook: boolean): INotice {
  const job = event.job;
  const label = jobLabel(job);
  const base = { type: 'info' as const, autoClose: AUTO_CLOSE[event.kind], job };
  const gpus = plural(job.gpus?.length ?? event.to ?? 0, 'GPU');
  switch (event.kind) {
    case 'started':
      return { ...base, message: clip(`${label} started on ${gpus}`), actions: [] };
    case 'resumed':
      return {
        ...base,
        message: clip(`${label} resumed on ${gpus} from its checkpoint`),
        actions: []
      };
    case 'resized': {
      const detail = reasonDetail(event.why, event.whyKind, event.whyFigures);
      const what =
        event.from === event.to
          ? `${label} moved to GPUs ${gpuList(job.gpus)}`
          : `${label} resized from ${event.from} to ${plural(event.to ?? 0, 'GPU')}`;
      return { ...base, message: clip(detail ? `${what}: ${detail}` : what), actions: [] };
    }
    case 'done': {
      const took =
        job.started_at && job.finished_at
          ? ` after ${duration(job.finished_at - job.started_at)}`
          : '';
      const loss = job.progress?.loss;
      const tail = typeof loss === 'number' ? `, loss ${Number(loss.toPrecision(3))}` : '';
      const notebook = canOpenNotebook && job.notebook;
      return {
        ...base,
        type: 'success',
        message: clip(`${label} is done${took}${tail}`),
        actions: notebook ? ['open-notebook', 'logs'] : ['logs']
      };
    }
    case 'idle': {
      const kernel = job.notebook ? `The GPU kernel of ${job.notebook}` : `${label}'s kernel`;
      const f = event.whyFigures ?? {};
      const message =
        typeof f.release_in_s === 'number' && typeof f.idle_s === 'number'
          ? `${kernel} loses its GPUs in ${minutes(f.release_in_s)} unless it runs code ` +
            `(idle for ${minutes(f.idle_s)})`
          : `${kernel}: ${event.why ?? ''}`;
      return {
        ...base,
        type: 'warning',
        message: clip(message),
        actions: canOpenNotebook && job.notebook ? ['open-notebook'] : []
      };
    }
    case 'failed': {
      const error = job.error;
      const why = error
        ? `${error.type}: ${error.message}`
        : typeof job.exit_code === 'number'
          ? `its trainer exited with code ${job.exit_code}`
          : 'see its log';
      return {
        ...base,
        type: 'error',
        message: clip(`${label} failed: ${why}`),
        actions: ['logs']
      };
    }
  }
}

/**
 * The notifications of one update: one each, or a single summary when there are more than
 * `MAX_NOTICES_AT_ONCE` (a page that opens after many jobs ended).
 */
export function noticesFor(events: IJobEvent[], canOpenNotebook: boolean): INotice[] {
  if (events.length <= MAX_NOTICES_AT_ONCE) {
    return events.map(e => noticeFor(e, canOpenNotebook));
  }
  const counts = new Map<JobEventKind, number>();
  for (const e of events) {
    counts.set(e.kind, (counts.get(e.kind) ?? 0) + 1);
  }
  const order: JobEventKind[] = ['failed', 'idle', 'done', 'resized', 'started', 'resumed'];
  const parts = order
    .filter(k => counts.has(k))
    .map(k =>
      k === 'idle'
        ? `${counts.get(k)} idle kernel(s) about to lose their GPUs`
        : `${counts.get(k)} ${k}`
    );
  return [
    {
      message: clip(`${plural(events.length, 'update')} on your GPU jobs: ${parts.join(', ')}`),
      type: counts.has('failed') ? 'error' : counts.has('idle') ? 'warning' : 'info',
      autoClose: counts.has('failed') || counts.has('idle') ? false : AUTO_CLOSE.done,
      actions: ['show-queue'],
      job: null
    }
  ];
}

function clip(text: string): string {
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 1)}\u2026`;
}

/** How the browser's memory of told milestones is named (docs/sidebar.md). */
export const MEMORY_PREFIX = 'jupyter-elastic-gpu:told:';

/** Where the told milestones are kept (the browser's localStorage on a page). */
export interface IMemory {
  read(key: string): string | null;
  write(key: string, value: string): void;
  /** Drop every key that starts with `prefix`. */
  forget(prefix: string): void;
}

/** localStorage, or nothing where the browser refuses it (then a reload may tell again). */
export function browserMemory(): IMemory {
  const storage = (): Storage | null => {
    try {
      return typeof localStorage === 'undefined' ? null : localStorage;
    } catch {
      return null;
    }
  };
  const attempt = (f: (s: Storage) => void) => {
    try {
      const s = storage();
      if (s) {
        f(s);
      }
    } catch {
      // full or forbidden: the memory is a convenience
    }
  };
  return {
    read: key => {
      try {
        return storage()?.getItem(key) ?? null;
      } catch {
        return null;
      }
    },
    write: (key, value) => attempt(s => s.setItem(key, value)),
    forget: prefix =>
      attempt(s => {
        const keys = Array.from({ length: s.length }, (_, i) => s.key(i));
        for (const key of keys) {
          if (key !== null && key.startsWith(prefix)) {
            s.removeItem(key);
          }
        }
      })
  };
}

/** What the notifier reads of the page's model. */
export interface INotifierModel {
  readonly changed: ISignal<any, void>;
  readonly data: IPanelData;
  readonly whoami: IWhoami | null;
  readonly problem: IProblem | null;
  acquire(): IDisposable;
}

export interface INotifierOptions {
  model: INotifierModel;
  /** Shows a notification. */
  emit: (notice: INotice) => void;
  /** Whether a job's notebook can be opened here. */
  canOpenNotebook: boolean;
  /** Tells the memory of one server from another's (its base URL). */
  scope: string;
  memory?: IMemory;
}

/**
 * Tells the caller about their jobs while `enabled`. It holds the page's model live while
 * enabled (the one websocket of the page; it lets go when the server has no scheduler).
 */
export class JobNotifier implements IDisposable {
  constructor(private readonly options: INotifierOptions) {
    this._memory = options.memory ?? browserMemory();
    options.model.changed.connect(this._update, this);
  }

  get enabled(): boolean {
    return this._enabled;
  }

  /** Off forgets what was told (also at start-up); on again, it starts from the state then. */
  set enabled(value: boolean) {
    if (value && this._enabled) {
      return;
    }
    this._enabled = value;
    if (!value) {
      this._release();
      this._memory.forget(this._prefix);
    }
    this._update();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._release();
    this.options.model.changed.disconnect(this._update, this);
  }

  /**
   * Runs again, once, when the model changes while it runs: acquiring the model makes it
   * emit `changed` before `acquire` returns, and a nested run would acquire it twice (and
   * a third ...) that nothing ever gives back.
   */
  private _update(): void {
    if (this._updating) {
      this._stale = true;
      return;
    }
    this._updating = true;
    try {
      do {
        this._stale = false;
        this._tell();
      } while (this._stale && !this._disposed);
    } finally {
      this._updating = false;
    }
  }

  private _tell(): void {
    const model = this.options.model;
    if (!this._enabled || this._disposed) {
      return;
    }
    if (model.problem?.kind === 'not-enabled') {
      this._release(); // no scheduler on this server: nothing will ever happen
      return;
    }
    if (!this._acquired) {
      this._acquired = model.acquire();
    }
    const user = model.whoami?.user;
    if (user === undefined || model.data.queue === null) {
      return;
    }
    // Read each time: another tab of the same lab may have told something since.
    const key = this._key(user);
    const stored = this._read(key);
    const silent = stored === null; // first time here: what is true now is old news
    const told = stored ?? {};
    const result = untold(told, model.data.jobs.values(), user);
    if (silent || JSON.stringify(result.told) !== JSON.stringify(told)) {
      this._memory.write(key, JSON.stringify(result.told));
    }
    if (!silent) {
      for (const notice of noticesFor(result.events, this.options.canOpenNotebook)) {
        this.options.emit(notice);
      }
    }
  }

  private _read(key: string): Told | null {
    const raw = this._memory.read(key);
    if (raw === null) {
      return null;
    }
    try {
      const value = JSON.parse(raw);
      return value && typeof value === 'object' && !Array.isArray(value) ? value : null;
    } catch {
      return null;
    }
  }

  /** The memory of this server: one key per user (`MEMORY_PREFIX` + scope + `:` + user). */
  private get _prefix(): string {
    return `${MEMORY_PREFIX}${this.options.scope}:`;
  }

  private _key(user: string): string {
    return this._prefix + user;
  }

  /** Lets go of the model; cleared first, since disposing it makes the model emit `changed`. */
  private _release(): void {
    const acquired = this._acquired;
    this._acquired = null;
    acquired?.dispose();
  }

  private _enabled = false;
  private _disposed = false;
  private _acquired: IDisposable | null = null;
  private _updating = false;
  private _stale = false;
  private _memory: IMemory;
}
