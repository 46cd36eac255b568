/**
 * One model per page, shared by the sidebar and every job card in notebooks: it follows the
 * scheduler through the push channel, falls back to polling (with exponential backoff on
 * errors) when the channel is down, and requests nothing while no view is visible or the
 * page is hidden.
 */
import { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { ApiError, ElasticGpuApi } from './api';
import { ProgressRecords } from './progress';
import { PushChannel } from './push';
import {
  applyMessage,
  EMPTY,
  fromDocuments,
  IPanelData,
  queueJobs,
  ResyncNeeded,
  withJob
} from './state';
import { IJob, IProgressRecord, IWhoami, PanelProblem } from './types';

/** How the model gets its updates now. */
export type Transport = 'push' | 'poll' | 'standby';

/** A panel-wide problem, with the message to show. */
export interface IProblem {
  kind: PanelProblem;
  message: string;
}

export interface IModelOptions {
  api?: ElasticGpuApi;
  /** Milliseconds between polls while the push channel is down. */
  interval?: number;
  /** The longest wait between polls after errors (exponential backoff up to it). */
  maxInterval?: number;
  /** Whether the page is hidden (default: `document.visibilityState`). */
  isPageHidden?: () => boolean;
  /** Where `visibilitychange` events come from (default: `document`). */
  pageEvents?: EventTarget | null;
  /** Seconds of GPU utilisation history kept for the charts. */
  historySeconds?: number;
}

/** A sample of one GPU's utilisation (`t` in ms since the epoch, `u` in 0..1). */
export interface IUtilSample {
  t: number;
  u: number;
}

/** Poll phases in which the poll is fetching by itself (not standing by). */
const POLLING = new Set(['resolved', 'reconnected', 'rejected', 'refreshed']);

export class ElasticGpuModel implements IDisposable {
  constructor(options: IModelOptions = {}) {
    this.api = options.api ?? new ElasticGpuApi();
    this._progress = new ProgressRecords(this.api, () => this._emit());
    this._isPageHidden =
      options.isPageHidden ??
      (() => typeof document !== 'undefined' && document.visibilityState === 'hidden');
    this._historyMs = (options.historySeconds ?? 300) * 1000;
    this._push = new PushChannel({
      api: this.api,
      onMessage: message => this._onPush(message),
      onDown: wasLive => {
        this._emit();
        // Catch up at once, unless the poll runs already (at its pace, or backing off).
        if (wasLive || !POLLING.has(this._poll.state.phase)) {
          void this._poll.refresh();
        }
      }
    });
    this._poll = new Poll({
      factory: () => this._fetchAll(),
      frequency: {
        interval: options.interval ?? 3000,
        backoff: true,
        max: options.maxInterval ?? 60000
      },
      name: 'jupyter-elastic-gpu:model',
      // While the push channel is live, or just opened and not silent for long, it has the data.
      standby: () => !this.active || this._push.live || this._push.pending,
      auto: true
    });
    this._pageEvents =
      options.pageEvents !== undefined
        ? options.pageEvents
        : typeof document !== 'undefined'
          ? document
          : null;
    this._pageEvents?.addEventListener('visibilitychange', this._onVisibility);
  }

  readonly api: ElasticGpuApi;

  /** Emitted after the data, the problem or the transport changed. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get data(): IPanelData {
    return this._data;
  }

  get whoami(): IWhoami | null {
    return this._whoami;
  }

  /** What keeps the panel from showing data, if anything (no GPUs is the view's to say). */
  get problem(): IProblem | null {
    return this._problem;
  }

  /** True while a view is visible and the page is shown: only then is anything requested. */
  get active(): boolean {
    return this._consumers > 0 && !this._isPageHidden();
  }

  get transport(): Transport {
    if (!this.active) {
      return 'standby';
    }
    return this._push.live ? 'push' : 'poll';
  }

  /** The polling fallback (exposed for tests and diagnostics). */
  get poll(): Poll {
    return this._poll;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /**
   * A visible view wants live data until the returned handle is disposed. The panel holds
   * one while it is shown, a job card in a notebook while its tab is shown.
   */
  acquire(): IDisposable {
    let held = true;
    this._consumers++;
    this._reconcile();
    return {
      get isDisposed() {
        return !held;
      },
      dispose: () => {
        if (held) {
          held = false;
          this._consumers--;
          this._reconcile();
        }
      }
    };
  }

  /** Recent utilisation of a GPU, oldest first. */
  utilisation(gpuId: string): readonly IUtilSample[] {
    return this._util.get(gpuId) ?? [];
  }

  /**
   * A job by id as the sidebar shows it (its queue entry merged in: reason, estimates), else
   * as `jobs` lists it, else fetched once (a job no list carries any more).
   */
  job(id: string): IJob | undefined {
    if (this._openData !== this._data) {
      this._openData = this._data;
      this._open = new Map(queueJobs(this._data).map(j => [j.id, j]));
    }
    const listed = this._open.get(id) ?? this._data.jobs.get(id);
    if (listed) {
      return listed;
    }
    const loaded = this._data.queue !== null; // else the lists will bring it
    if (loaded && !this._extra.has(id) && !this._fetchingJob.has(id) && this.active) {
      this._fetchingJob.add(id);
      this.api
        .job(id)
        .then(job => {
          this._extra.set(id, job);
          this._emit();
        })
        .catch(() => undefined)
        .finally(() => this._fetchingJob.delete(id));
    }
    return this._extra.get(id);
  }

  /** The job's progress records, once `watchProgress` asked for them. */
  progress(id: string): readonly IProgressRecord[] {
    return this._progress.records(id);
  }

  /** Keep the job's progress records up to date until the handle is disposed. */
  watchProgress(id: string): IDisposable {
    const handle = this._progress.watch(id);
    this._refreshProgress();
    return handle;
  }

  /** Cancel, suspend or resume a job; the answer updates the data at once. */
  async change(id: string, how: 'cancel' | 'suspend' | 'resume'): Promise<void> {
    const job = await this.api[how](id);
    this._data = withJob(this._data, job);
    this._emit();
  }

  cancel(id: string): Promise<void> {
    return this.change(id, 'cancel');
  }

  /** Fetch everything now (the push channel, if live, stays). */
  async refresh(): Promise<void> {
    await this._fetchAll();
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._pageEvents?.removeEventListener('visibilitychange', this._onVisibility);
    this._push.close();
    this._poll.dispose();
    Signal.clearData(this);
  }

  /** Fetch everything; a call while a fetch runs gets one more fetch after it. */
  private _fetchAll(): Promise<void> {
    if (this._inflight) {
      this._again = true;
      return this._inflight;
    }
    this._inflight = this._fetchDocuments().finally(() => {
      this._inflight = null;
      if (this._again && !this._disposed) {
        this._again = false;
        void this._fetchAll().catch(() => undefined);
      }
    });
    return this._inflight;
  }

  /** The REST routes, after the state version they are at least as new as. */
  private async _fetchDocuments(): Promise<void> {
    try {
      if (!this._whoami) {
        this._whoami = await this.api.whoami();
      }
      const { version } = await this.api.updates();
      const [inventory, queue, jobs] = await Promise.all([
        this.api.gpus(),
        this.api.queue(),
        this.api.jobs()
      ]);
      this._setData(fromDocuments(this._data, version, inventory, queue, jobs));
      this._setProblem(null);
    } catch (error) {
      this._setProblem(problemFrom(error));
      throw error; // the poll backs off
    }
  }

  private _onPush(message: any): void {
    if (message?.type === 'error') {
      this._setProblem({ kind: 'unavailable', message: String(message.message ?? '') });
      return;
    }
    if (message?.type === 'update') {
      // A server without the panel subscription: its status says a version, fetch the rest.
      if (message.version !== this._data.version || this._data.queue === null) {
        void this._fetchAll().catch(() => undefined);
      }
      this._emit();
      return;
    }
    try {
      this._setData(applyMessage(this._data, message));
      if (message?.type === 'snapshot') {
        this._setProblem(null);
      }
    } catch (error) {
      if (error instanceof ResyncNeeded) {
        this._push.restart();
        return;
      }
      throw error;
    }
    if (!this._whoami) {
      void this.api
        .whoami()
        .then(who => {
          this._whoami = who;
          this._emit();
        })
        .catch(() => undefined);
    }
  }

  private _setData(data: IPanelData): void {
    const gpusChanged = data.gpus !== this._data.gpus;
    this._data = data;
    if (gpusChanged) {
      this._sampleUtilisation();
    }
    this._refreshProgress();
    this._emit();
  }

  private _setProblem(problem: IProblem | null): void {
    const same =
      problem?.kind === this._problem?.kind && problem?.message === this._problem?.message;
    this._problem = problem;
    if (!same) {
      this._emit();
    }
  }

  private _sampleUtilisation(): void {
    const now = Date.now();
    for (const gpu of this._data.gpus ?? []) {
      if (typeof gpu.utilization !== 'number') {
        continue;
      }
      const samples = this._util.get(gpu.id) ?? [];
      samples.push({ t: now, u: gpu.utilization });
      while (samples.length > 2 && samples[0].t < now - this._historyMs) {
        samples.shift();
      }
      this._util.set(gpu.id, samples);
    }
  }

  /** Loss curves on screen follow their jobs (only while the model is active). */
  private _refreshProgress(): void {
    if (this.active) {
      this._progress.refresh(id => this.job(id));
    }
  }

  /** Open or close the push channel as views come and go and the page shows or hides. */
  private _reconcile(): void {
    if (this._disposed) {
      return;
    }
    if (this.active) {
      this._push.open();
      if (!this._push.live && !this._push.pending) {
        void this._poll.refresh();
      }
    } else {
      this._push.close();
    }
    this._emit();
  }

  private _onVisibility = (): void => this._reconcile();

  private _emit(): void {
    if (!this._disposed) {
      this._changed.emit();
    }
  }

  private _changed = new Signal<this, void>(this);
  private _data: IPanelData = EMPTY;
  private _whoami: IWhoami | null = null;
  private _problem: IProblem | null = null;
  private _consumers = 0;
  private _inflight: Promise<void> | null = null;
  private _again = false;
  private _disposed = false;
  private _push: PushChannel;
  private _poll: Poll;
  private _isPageHidden: () => boolean;
  private _pageEvents: EventTarget | null;
  private _historyMs: number;
  private _util = new Map<string, IUtilSample[]>();
  private _extra = new Map<string, IJob>();
  private _open = new Map<string, IJob>();
  private _openData: IPanelData | null = null;
  private _fetchingJob = new Set<string>();
  private _progress: ProgressRecords;
}

/** The panel-wide message for a failed fetch. */
function problemFrom(error: unknown): IProblem {
  if (error instanceof ApiError) {
    const kind = error.problem ?? 'unavailable';
    return { kind, message: messageFor(kind, error.message) };
  }
  return { kind: 'unavailable', message: messageFor('unavailable', String(error)) };
}

function messageFor(kind: PanelProblem, detail: string): string {
  switch (kind) {
    case 'not-enabled':
      return (
        'The elastic GPU scheduler is not enabled on this Jupyter server. Enable it with ' +
        '"jupyter server extension enable jupyter_elastic_gpu" and restart the server.'
      );
    case 'unauthorized':
      return (
        `You are not signed in to this Jupyter server (${detail}). ` +
        'Reload the page to sign in again.'
      );
    default:
      return `The GPU scheduler cannot answer now: ${detail}`;
  }
}
