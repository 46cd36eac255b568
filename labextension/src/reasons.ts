/**
 * The words of a reason, made from its kind and figures: the lab extension's one formatter,
 * the twin of core/reason_text.py (both are tested against tests/fixtures/reasons.json).
 * The panel decides by `reason_kind` and the figures, never by reading the words; it makes
 * the words itself where it shows a part of them (without the state its badge shows, or
 * without the forecast its own line says).
 */
import { IIdleCause, IJobRef, IReasonFigures, ReasonKind } from './types';

/** How many holders of a waiting job's GPUs its reason names; the rest are counted. */
export const NAMED_HOLDERS = 2;

const AHEAD: Record<string, string> = {
  critical: 'on the critical path',
  shorter: 'shorter',
  waited: 'has waited longer',
  priority: 'higher priority',
  running: 'already running',
  earlier: 'submitted earlier',
  less_left: 'less time left',
  less_service: 'less attained service',
  less_weighted: 'less progress-weighted service'
};

const BECAUSE: Record<string, string> = {
  in_progress: 'its resize is in progress',
  finishing: 'it is about to finish',
  resized: 'it was resized moments ago',
  started: 'it started moments ago'
};

/** A reason's text in its parts: `head` (opening with the state word `lead`, where it has
 * one) and `detail` (after ": "; "" for none). */
export interface IReasonParts {
  lead: string | null;
  head: string;
  detail: string;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** A GPU range, the one way every front end writes it (core/reason_text.py's gpu_range):
 * "1–4 GPUs", "2 GPUs". */
export function gpuRange(lo: number, hi: number): string {
  return lo === hi ? plural(lo, 'GPU') : `${lo}\u2013${hi} GPUs`;
}

/** Python's round(): halves to the even neighbour. */
function roundEven(x: number): number {
  const down = Math.floor(x);
  if (x - down === 0.5) {
    return down % 2 === 0 ? down : down + 1;
  }
  return Math.round(x);
}

/** Python's f"{x:.Nf}": a tie goes to the even digit. */
function fixed(x: number, digits: number): string {
  const scale = 10 ** digits;
  return (roundEven(x * scale) / scale).toFixed(digits);
}

/** Python's f"{x:.2g}". */
function twoDigits(x: number): string {
  const text = Number(x.toPrecision(2)).toString();
  return text.replace(/e([+-])(\d)$/, 'e$10$2');
}

/** A duration as an estimate: "~6 s", "~35 s", "~3 min", "~1.5 h", "~2 days". */
export function about(seconds: number): string {
  if (!Number.isFinite(seconds)) {
    return 'never';
  }
  const s = Math.max(seconds, 0);
  if (s < 0.5) {
    return 'under 1 s';
  }
  if (s < 10) {
    return `~${roundEven(s)} s`;
  }
  if (s < 57.5) {
    return `~${5 * roundEven(s / 5)} s`;
  }
  if (s < 59.5 * 60) {
    return `~${Math.max(roundEven(s / 60), 1)} min`;
  }
  if (s < 23.5 * 3600) {
    const h = s / 3600;
    return h < 9.95 ? `~${fixed(h, 1)} h` : `~${roundEven(h)} h`;
  }
  const d = s / 86400;
  return d < 9.95 ? `~${fixed(d, 1)} days` : `~${roundEven(d)} days`;
}

/** A kernel's idle time or time left as core/idle.py says it: "45 seconds", "12 minutes". */
export function minutes(seconds: number): string {
  return seconds < 90
    ? plural(roundEven(seconds), 'second')
    : plural(roundEven(seconds / 60), 'minute');
}

/** A half-life as people say it: "7 days", "36 hours", "20 minutes". */
export function formatDays(seconds: number): string {
  const units: [string, number][] = [
    ['day', 86400],
    ['hour', 3600],
    ['minute', 60]
  ];
  for (const [unit, size] of units) {
    if (seconds >= size) {
      const n = seconds / size;
      const text = Math.abs(n - roundEven(n)) < 0.05 ? fixed(n, 0) : fixed(n, 1);
      return `${text} ${unit}${text === '1' ? '' : 's'}`;
    }
  }
  return `${fixed(seconds, 0)} seconds`;
}

function num(x: number): string {
  return Number.isInteger(x) ? String(x) : twoDigits(x);
}

/** A job as a reason names it: 'its name' in quotes, its id when it has none. */
export function jobName(ref: IJobRef | null | undefined): string {
  return ref?.name ? `'${ref.name}'` : String(ref?.id ?? '?');
}

function listed(items: string[]): string {
  return items.length === 1
    ? items[0]
    : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

function limit(f: IReasonFigures): string {
  const share = f.share;
  if (!share) {
    return `${f.user ?? '?'} may hold at most ${plural(f.cap ?? 0, 'GPU')} at a time`;
  }
  let text =
    `fair share: ${share.user}'s share now is ${share.due} of ${share.total} GPUs ` +
    `(weight ${num(share.weight)} of ${num(share.weights)})`;
  if (share.over) {
    text +=
      `; ${share.over} has used ${fixed(share.ratio ?? 0, 1)}x their share over the last ` +
      formatDays(share.half_life_s ?? 0);
  }
  return text;
}

function holders(f: IReasonFigures): string {
  const all = f.holders ?? [];
  if (!all.length) {
    return '';
  }
  const groups = new Map<string, string[]>();
  for (const h of all.slice(0, NAMED_HOLDERS)) {
    const why = h.ahead ?? '';
    groups.set(why, [...(groups.get(why) ?? []), jobName(h)]);
  }
  const named = [...groups].map(([why, names]) => listed(names) + (why ? ` (${AHEAD[why]})` : ''));
  const others = (f.others ?? 0) + Math.max(all.length - NAMED_HOLDERS, 0);
  if (others) {
    named.push(plural(others, 'more job'));
  }
  return `; GPUs held by ${listed(named)}`;
}

function start(f: IReasonFigures): string {
  if (f.start_in_s === undefined || f.start_in_s === null) {
    return '';
  }
  const s = f.start_in_s;
  const when = s < 60 ? 'starts in under a minute' : `starts in ${about(s)}`;
  const on = f.start_kind ? ` on ${f.start_kind}` : '';
  return f.start_after
    ? `; ${when}${on}, when ${jobName(f.start_after)} finishes`
    : `; ${when}${on}`;
}

function keptFigures(f: IReasonFigures): string {
  if (typeof f.left_s === 'number' && typeof f.cost_s === 'number') {
    return ` (${about(f.left_s)} left; a resize costs ${about(f.cost_s)})`;
  }
  if (typeof f.hold_s === 'number') {
    return ` (left alone ${about(f.hold_s)} after a change)`;
  }
  return '';
}

function unpaid(f: IReasonFigures): string {
  const gain = f.gain_s ?? 0;
  const cost = f.cost_s ?? 0;
  let text = `would save ${about(gain)}, a resize costs ${about(cost)}`;
  if (gain >= cost) {
    text += ` (must save ${about(f.need_s ?? 0)})`;
  }
  return text;
}

/** Where a job's GPUs must be: on one server, of one kind where kinds are mixed. */
function together(f: IReasonFigures): string {
  return f.kinds ? 'of one kind on one server' : 'on one server';
}

function spread(f: IReasonFigures): string {
  const kinds = f.kinds ? ` (${f.kinds})` : '';
  return (
    `needs ${plural(f.needs ?? 0, 'GPU')} ${together(f)}: ${f.free ?? 0} free, ` +
    `at most ${f.widest ?? 0} together${kinds}`
  );
}

function migSlice(f: IReasonFigures): string {
  const n = f.slices ?? 0;
  const before = f.before ?? 0;
  if (!n && f.drained) {
    return `needs a ${f.profile ?? ''} MIG slice: none in service now (${f.drained} on a GPU drained for maintenance)`;
  }
  if (!n) {
    return `needs a ${f.profile ?? ''} MIG slice: none here now (a GPU's MIG layout changed)`;
  }
  let text = `needs a ${f.profile ?? ''} MIG slice: ${n} here, ${n === 1 ? 'held' : 'all held'}`;
  if (before) {
    text += `; ${before} more wait${before === 1 ? 's' : ''} before it`;
  }
  return text;
}

function resized(f: IReasonFigures): string {
  const held = f.held ?? 0;
  const gpus = f.gpus ?? 0;
  if (gpus > held) {
    return (
      `grown from ${held}, saves ${about(f.change_s ?? 0)}, ` +
      `a resize costs ${about(f.cost_s ?? 0)}`
    );
  }
  const later = `(it ends ${about(-(f.change_s ?? 0))} later)`;
  const room = f.for_job;
  if (!room) {
    return `shrunk from ${held} for jobs its GPUs help more ${later}`;
  }
  return `shrunk from ${held} so that ${jobName(room)} can ${room.starts ? 'start now' : 'grow'} ${later}`;
}

function part(lead: string | null, head: string, detail = ''): IReasonParts {
  return { lead, head, detail };
}

function baseParts(kind: ReasonKind, f: IReasonFigures): IReasonParts {
  const gpus = f.gpus ?? 0;
  // what a job runs on: its GPUs, or its MIG slice
  const held = f.profile ? `a ${f.profile} MIG slice` : plural(gpus, 'GPU');
  const on = `running on ${held}`;
  const elastic = `running on ${gpus} of up to ${f.top ?? 0} GPUs`;
  const waits = f.suspended ? 'suspended' : 'queued';
  const by = f.by ?? '?';
  switch (kind) {
    case 'new':
      return part('queued', 'queued', 'waiting for the first decision');
    case 'waiting':
      return part(
        waits,
        waits,
        `needs ${plural(f.needs ?? 0, 'GPU')}, ${f.free ?? 0} free` + holders(f)
      );
    case 'spread':
      return part(waits, waits, spread(f));
    case 'mig_slice':
      return part(waits, waits, migSlice(f));
    case 'running':
      return part('running', on);
    case 'at_maximum':
      return part('running', `${on} (its maximum)`);
    case 'kept':
      return part(
        'running',
        on,
        `kept as is because ${BECAUSE[f.because ?? 'in_progress']}${keptFigures(f)}`
      );
    case 'critical':
      return part(
        'running',
        elastic,
        'on the critical path, these end it in time with the rest of the work'
      );
    case 'crowded':
      return part('running', elastic, 'the others help other jobs more');
    case 'no_faster':
      return part('running', elastic, 'more would not make it faster');
    case 'resize_would_not_pay':
      return part('running', elastic, `${f.to ?? 0} ${unpaid(f)}`);
    case 'resized':
      return part('running', elastic, resized(f));
    case 'limited':
      return gpus ? part('running', elastic, limit(f)) : part(waits, waits, limit(f));
    case 'waiting_for_server':
      return part(
        null,
        'waiting for your server',
        'your jobs start from your own Jupyter server, which is not running; start it ' +
          '(on JupyterHub: Start My Server) and this job is scheduled'
      );
    case 'starting':
      return part('starting', `starting on ${held}`);
    case 'resuming':
      return part('resuming', `resuming on ${held} from its checkpoint`);
    case 'resizing':
      return part(
        'resizing',
        `resizing to ${plural(gpus, 'GPU')}`,
        'checkpoint, then restart on them'
      );
    case 'held':
      if (f.stopping) {
        return part(
          'suspending',
          `suspending at ${by}'s request`,
          'checkpoint, then stop; held until resumed'
        );
      }
      if (f.admin) {
        return part(
          'suspended',
          `suspended by ${by} (an admin)`,
          'it gets no GPUs until an admin resumes it; it resumes from its checkpoint'
        );
      }
      return part(
        'suspended',
        `suspended by ${by}`,
        `it gets no GPUs until resumed (POST jobs/${f.job_id ?? '?'}/resume); ` +
          'it resumes from its checkpoint'
      );
    case 'suspended':
      return part(
        'suspended',
        'suspended',
        (f.for_others ? 'its GPUs went to jobs that need them more; ' : '') +
          'it resumes from its checkpoint'
      );
    case 'unheld':
      return part('resumed', `resumed by ${by}`, 'waiting for the next decision');
    case 'cancelling':
      return part('cancelling', `cancelling at ${by}'s request`, 'checkpoint, then stop');
    case 'cancelled':
      return f.by
        ? part('cancelled', `cancelled by ${by}`)
        : part('cancelled', 'cancelled', f.detail ?? '');
    case 'done':
      return part('done', 'done');
    case 'failed':
      return part('failed', 'failed', f.detail || 'error');
    case 'requeued':
      if (typeof f.silent_s === 'number') {
        return part(
          'queued',
          'queued again',
          `its sidecar stopped answering ${fixed(f.silent_s, 0)} s ago; it resumes from its ` +
            'last checkpoint'
        );
      }
      return part('queued', 'queued again', f.detail ?? '');
    case 'kernel':
      return part(null, `holds ${held} for its notebook kernel`);
    case 'idle_warning':
    case 'released':
      return part(null, f.detail ?? '');
    case 'kernel_ended':
      if (f.withdrawn) {
        return part(null, 'withdrawn by its kernel before it got GPUs');
      }
      return part(null, 'ended', `its kernel ${f.died ? 'died' : 'shut down'}`);
    case 'public': {
      const state = f.state ?? 'queued';
      return part(state, state === 'queued' ? state : `${state} on ${plural(gpus, 'GPU')}`);
    }
    case 'idle':
      return part(null, `${plural(gpus, 'GPU')} idle`, idleCauses(f));
  }
}

/**
 * Why the job `ref` takes none of the idle GPUs, as part of the idle line (null: its reason
 * has nothing to do with them); `isPublic`: for a reader who may not see the job.
 */
export function cause(
  ref: IJobRef,
  kind: ReasonKind,
  figures: IReasonFigures | null | undefined,
  isPublic = false,
  at: number | null = null
): string | null {
  const f = figures ?? {};
  const who = jobName(ref);
  switch (kind) {
    case 'waiting':
      return (f.needs ?? 0) > (f.free ?? 0) ? `${who} needs ${f.needs}` : null;
    case 'spread':
      return `${who} needs ${f.needs ?? 0} ${together(f)}`;
    case 'kept': {
      const because = f.because ?? 'in_progress';
      if (isPublic || (because !== 'resized' && because !== 'started')) {
        return `${who} is kept as is because ${BECAUSE[because]}${isPublic ? '' : keptFigures(f)}`;
      }
      if (at === null || typeof f.changed_at !== 'number' || typeof f.hold_s !== 'number') {
        return `${who} is kept as is because ${BECAUSE[because]}${keptFigures(f)}`;
      }
      const since = at - f.changed_at;
      const did = because === 'resized' ? 'was resized' : 'started';
      return `${who} ${did} ${about(since)} ago and is kept as is for ${about(f.hold_s - since)} more`;
    }
    case 'critical':
      return `${who} has what ends it in time with the rest of the work`;
    case 'no_faster':
      return `${who} would go no faster on more`;
    case 'resize_would_not_pay':
      return isPublic
        ? `growing ${who} would not pay for its resize`
        : `growing ${who} to ${f.to} ${unpaid(f)}`;
    case 'limited':
      return isPublic ? `${who} is at its user's limit` : `${who}: ${limit(f)}`;
    default:
      return null;
  }
}

function idleCauses(f: IReasonFigures): string {
  const said = (f.causes ?? []).map((c: IIdleCause) =>
    cause(c.job, c.kind, c.figures, c.public ?? false, f.at ?? null)
  );
  return said.filter(s => s).join('; ') || 'no job can use more';
}

/** The text of a reason of `kind` with `figures`, in its parts (a forecast at the end). */
export function reasonParts(
  kind: ReasonKind,
  figures: IReasonFigures | null | undefined
): IReasonParts {
  const f = figures ?? {};
  const p = baseParts(kind, f);
  const more = start(f);
  if (!more) {
    return p;
  }
  return p.detail ? { ...p, detail: p.detail + more } : { ...p, head: p.head + more };
}

/** The text of a reason of `kind` with `figures`: what the scheduler sends as `reason`. */
export function reasonText(kind: ReasonKind, figures?: IReasonFigures | null): string {
  const p = reasonParts(kind, figures);
  return p.detail ? `${p.head}: ${p.detail}` : p.head;
}

/**
 * The text shown next to a badge of `state`: without its opening state word when it has
 * that one ("queued: needs 2 GPUs" beside "queued" reads "needs 2 GPUs").
 */
export function reasonAfterState(
  state: string,
  kind: ReasonKind,
  figures?: IReasonFigures | null
): string {
  const p = reasonParts(kind, figures);
  if (p.lead !== state) {
    return p.detail ? `${p.head}: ${p.detail}` : p.head;
  }
  const rest = p.head.slice(p.lead.length).trim();
  return rest && p.detail ? `${rest}: ${p.detail}` : rest || p.detail;
}
