/**
 * What the panel knows of the scheduler, and the pure rules that change it: a full fetch of
 * the REST routes, the push channel's `snapshot`, then its `delta` messages (docs/api.md,
 * "ws"). Objects that did not change keep their identity, so a view redraws only what an
 * update touched (one job among 500 costs one card).
 */
import { GpuSource, IGpu, IGpuInventory, IJob, IQueueEntry, isFinal } from './types';

export interface IPanelData {
  /** The scheduler's state version these documents belong to (null: not known). */
  readonly version: number | null;
  /** `nvml` or `simulated`; null until the GPUs are known. */
  readonly source: GpuSource | null;
  /** Every GPU (null until known). */
  readonly gpus: readonly IGpu[] | null;
  /** Why usable GPUs get no job (`GET gpus`' `idle`); null when none is idle. */
  readonly idle: string | null;
  /** Open jobs in the policy's order (null until known). */
  readonly queue: readonly IQueueEntry[] | null;
  /** Every job the caller may list, by id (own ones in full, others' public view). */
  readonly jobs: ReadonlyMap<string, IJob>;
}

export const EMPTY: IPanelData = {
  version: null,
  source: null,
  gpus: null,
  idle: null,
  queue: null,
  jobs: new Map()
};

/** The documents of `GET gpus`, `GET queue` and `GET jobs` as one state. */
export function fromDocuments(
  previous: IPanelData,
  version: number | null,
  inventory: IGpuInventory,
  queue: IQueueEntry[],
  jobs: IJob[]
): IPanelData {
  return {
    version,
    source: inventory.source ?? null,
    gpus: keepSame(previous.gpus, inventory.gpus ?? []),
    idle: inventory.idle ?? null,
    queue: keepSame(previous.queue, queue),
    jobs: replaceJobs(previous.jobs, jobs)
  };
}

/** A push message the state could not take: the caller subscribes again. */
export class ResyncNeeded extends Error {}

/**
 * Apply one message of the panel subscription (docs/api.md, "The panel's websocket"): a
 * `snapshot` replaces everything; a `delta` carries `gpus` whole when they changed, and for
 * `queue` and `jobs` a list delta `{changed, removed, order}`. A delta before any snapshot
 * throws `ResyncNeeded`.
 */
export function applyMessage(data: IPanelData, message: any): IPanelData {
  if (!message || typeof message !== 'object') {
    return data;
  }
  if (message.type === 'snapshot') {
    return fromDocuments(
      data,
      numberOr(message.version, null),
      inventoryOf(message.gpus) ?? { source: data.source ?? 'nvml', gpus: [] },
      listOf<IQueueEntry>(message.queue, 'queue') ?? [],
      listOf<IJob>(message.jobs, 'jobs') ?? []
    );
  }
  if (message.type !== 'delta') {
    return data;
  }
  if (data.version === null || data.queue === null || data.gpus === null) {
    throw new ResyncNeeded('a delta before any snapshot');
  }
  const inventory = inventoryOf(message.gpus);
  const queue = message.queue ? applyList(data.queue, message.queue, 'queue') : data.queue;
  let jobs = data.jobs;
  if (message.jobs) {
    const list = applyList([...data.jobs.values()], message.jobs, 'jobs');
    jobs = list === null ? data.jobs : new Map(list.map(j => [j.id, j]));
  }
  return {
    version: numberOr(message.version, data.version),
    source: inventory ? (inventory.source ?? data.source) : data.source,
    gpus: inventory ? keepSame(data.gpus, inventory.gpus ?? []) : data.gpus,
    idle: inventory ? (inventory.idle ?? null) : data.idle,
    queue: queue ?? data.queue,
    jobs
  };
}

/**
 * A list after a list delta: drop `removed`, replace each of `changed` where it stands (or
 * append it), then follow `order` when given. A bare list replaces the whole.
 */
function applyList<T extends { id: string }>(
  list: readonly T[],
  change: any,
  key: string
): readonly T[] | null {
  const whole = listOf<T>(change, key);
  if (whole) {
    return keepSame(list, whole);
  }
  if (!change || typeof change !== 'object') {
    return null;
  }
  const gone = new Set<string>(Array.isArray(change.removed) ? change.removed : []);
  const entries = list.filter(e => !gone.has(e.id));
  const index = new Map(entries.map((e, i) => [e.id, i]));
  for (const entry of Array.isArray(change.changed) ? (change.changed as T[]) : []) {
    const at = index.get(entry.id);
    if (at === undefined) {
      index.set(entry.id, entries.length);
      entries.push(entry);
    } else {
      entries[at] = entry;
    }
  }
  if (Array.isArray(change.order)) {
    const byId = new Map(entries.map(e => [e.id, e]));
    const ordered = (change.order as string[]).map(id => byId.get(id));
    if (ordered.some(e => e === undefined)) {
      throw new ResyncNeeded('a delta orders entries the panel does not have');
    }
    return ordered as T[];
  }
  return entries;
}

/** A job changed by an action (a cancel's answer), before the next update says so. */
export function withJob(data: IPanelData, job: IJob): IPanelData {
  const jobs = new Map(data.jobs);
  jobs.set(job.id, { ...data.jobs.get(job.id), ...job });
  const queue = data.queue?.map(e =>
    e.id === job.id ? { ...e, state: job.state, gpus: job.gpus ?? e.gpus } : e
  );
  return { ...data, jobs, queue: queue ?? data.queue };
}

const merged = new WeakMap<IQueueEntry, { job: IJob | undefined; view: IJob }>();

/** The open jobs in queue order, each its queue entry merged with what `jobs` says of it. */
export function queueJobs(data: IPanelData): IJob[] {
  return (data.queue ?? []).map(entry => {
    const job = data.jobs.get(entry.id);
    const cached = merged.get(entry);
    if (cached && cached.job === job) {
      return cached.view;
    }
    const view: IJob = job ? { ...job, ...dropNulls(entry, ['name']), state: entry.state } : entry;
    merged.set(entry, { job, view });
    return view;
  });
}

/** The caller's finished jobs, newest first (none still listed in the queue). */
export function recentJobs(data: IPanelData, user: string | null, limit: number): IJob[] {
  const open = new Set((data.queue ?? []).map(e => e.id));
  const mine = [...data.jobs.values()].filter(
    j => isFinal(j.state) && (user === null || j.user === user) && !open.has(j.id)
  );
  mine.sort((a, b) => (b.finished_at ?? 0) - (a.finished_at ?? 0));
  return mine.slice(0, limit);
}

/** `next`, reusing each element of `previous` that is equal to its new copy. */
function keepSame<T extends { id: string }>(
  previous: readonly T[] | null,
  next: T[]
): readonly T[] {
  if (!previous) {
    return next;
  }
  const old = new Map(previous.map(x => [x.id, x]));
  let same = previous.length === next.length;
  const out = next.map((x, i) => {
    const before = old.get(x.id);
    const kept = before && shallowJsonEqual(before, x) ? before : x;
    same = same && kept === previous[i];
    return kept;
  });
  return same ? previous : out;
}

function replaceJobs(previous: ReadonlyMap<string, IJob>, jobs: IJob[]): Map<string, IJob> {
  const next = new Map<string, IJob>();
  for (const job of jobs) {
    const before = previous.get(job.id);
    next.set(job.id, before && shallowJsonEqual(before, job) ? before : job);
  }
  return next;
}

function shallowJsonEqual(a: object, b: object): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function dropNulls<T extends object>(entry: T, keys: string[]): Partial<T> {
  const out: any = { ...entry };
  for (const key of keys) {
    if (out[key] === null || out[key] === undefined) {
      delete out[key];
    }
  }
  return out;
}

function numberOr<T>(value: unknown, fallback: T): number | T {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

/** `GET gpus`'s document, or a bare list of GPUs. */
function inventoryOf(value: any): IGpuInventory | null {
  if (Array.isArray(value)) {
    return { source: undefined as any, gpus: value };
  }
  if (value && typeof value === 'object' && Array.isArray(value.gpus)) {
    return value as IGpuInventory;
  }
  return null;
}

/** A list, or the document a REST route answers (`{"queue": [...]}`, `{"jobs": [...]}`). */
function listOf<T>(value: any, key: string): T[] | null {
  if (Array.isArray(value)) {
    return value;
  }
  if (value && typeof value === 'object' && Array.isArray(value[key])) {
    return value[key];
  }
  return null;
}
