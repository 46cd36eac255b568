/**
 * The progress records of the jobs whose loss curve is on screen: fetched from
 * `jobs/ID/progress` from the last record held on, only when the job moved on, and no more
 * once it has ended.
 */
import { IDisposable } from '@lumino/disposable';

import { ElasticGpuApi } from './api';
import { IJob, IProgressRecord, isFinal } from './types';

/** Most progress records kept per job. */
export const MAX_PROGRESS = 5000;

interface IEntry {
  records: IProgressRecord[];
  watchers: number;
  /** What the job said of itself at the last fetch (state and step). */
  seen: string | undefined;
  busy: boolean;
  done: boolean;
}

export class ProgressRecords {
  constructor(
    private readonly api: ElasticGpuApi,
    private readonly changed: () => void
  ) {}

  records(id: string): readonly IProgressRecord[] {
    return this._entries.get(id)?.records ?? [];
  }

  /** Follow the job until the handle is disposed. */
  watch(id: string): IDisposable {
    let entry = this._entries.get(id);
    if (!entry) {
      entry = { records: [], watchers: 0, seen: undefined, busy: false, done: false };
      this._entries.set(id, entry);
    }
    const held = entry;
    held.watchers++;
    let disposed = false;
    return {
      get isDisposed() {
        return disposed;
      },
      dispose: () => {
        if (!disposed) {
          disposed = true;
          held.watchers--;
        }
      }
    };
  }

  /** Fetch what is new for every watched job that moved on (`job` says where each is). */
  refresh(job: (id: string) => IJob | undefined): void {
    for (const [id, entry] of this._entries) {
      if (entry.watchers > 0 && !entry.busy && !entry.done) {
        this._fetch(id, entry, job(id));
      }
    }
  }

  private _fetch(id: string, entry: IEntry, job: IJob | undefined): void {
    const seen = job ? `${job.state}:${job.progress?.global_step ?? ''}` : undefined;
    if (entry.seen !== undefined && seen === entry.seen) {
      return;
    }
    entry.busy = true;
    const last = entry.records[entry.records.length - 1];
    this.api
      .progress(id, last?.t)
      .then(records => {
        entry.records = entry.records.concat(records).slice(-MAX_PROGRESS);
        entry.seen = seen;
        entry.done = job !== undefined && isFinal(job.state);
        this.changed();
      })
      .catch(() => undefined)
      .finally(() => {
        entry.busy = false;
      });
  }

  private _entries = new Map<string, IEntry>();
}
