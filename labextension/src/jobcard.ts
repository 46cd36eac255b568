/**
 * The job card: the one view of a job, used by the sidebar's queue and recent list and by
 * the notebook's job output (renderer.ts). It shows only what the API gave for the job (for
 * another user's job: owner, size, state, place), and redraws only when its inputs changed.
 */
import { lossChart } from './chart';
import { Child, h, reorder, toNodes } from './dom';
import { clock, duration, epochText, gpuList, gpuRange, percent, plural, relative } from './format';
import { reasonAfterState } from './reasons';
import { IJob, IJobRef, IGrantChange, IProgressRecord, IWhoami, isFinal } from './types';

/** What a card's buttons do (`data-action` values of the DOM contract, docs/sidebar.md). */
export type JobAction = 'cancel' | 'suspend' | 'resume' | 'logs' | 'open-notebook';

export interface ICardContext {
  /** Who is looking (null until known: no actions then). */
  me: IWhoami | null;
  /** Whether a notebook can be opened here (a document manager is present). */
  canOpenNotebook: boolean;
  /** The job's progress records, for the loss curve of a full card. */
  progress?: readonly IProgressRecord[];
  /** Now, in ms (relative times). */
  now: number;
  /** The name of another job the viewer knows by id (the one a queued job waits for). */
  nameOf?: (id: string) => string | null | undefined;
}

export interface IJobCardOptions {
  /** `compact` in the sidebar; `full` (loss curve, whole history) in a notebook. */
  detail: 'compact' | 'full';
  onAction: (action: JobAction, job: IJob) => void;
}

/** How often relative times ("in 6 min") are recomputed, in ms. */
export const RELATIVE_TIME_STEP = 30000;

export class JobCard {
  readonly node: HTMLElement;

  constructor(private readonly options: IJobCardOptions) {
    this.node = h('article', {
      class: `jp-ElasticGpu-job jp-ElasticGpu-job-${options.detail}`
    });
    this.node.addEventListener('click', this._onClick);
  }

  get job(): IJob | null {
    return this._job;
  }

  /** Redraw for `job`; a no-op when nothing the card shows changed. */
  update(job: IJob, ctx: ICardContext): void {
    const key = [
      ctx.me?.user,
      ctx.me?.admin,
      ctx.canOpenNotebook,
      ctx.progress?.length ?? 0,
      Math.floor(ctx.now / RELATIVE_TIME_STEP)
    ].join('|');
    if (job === this._job && key === this._key) {
      return;
    }
    if (job !== this._job) {
      this._pending.clear();
    }
    this._job = job;
    this._key = key;
    this.node.dataset.jobId = job.id;
    this.node.dataset.jobState = job.state;
    this.node.dataset.jobKind = job.kind ?? 'script';
    // A rebuild must not close the grant changes a person opened to read.
    const opened = this.node.querySelector<HTMLDetailsElement>('details.jp-ElasticGpu-resizes');
    // The buttons stay where they are (never detached): the rest is replaced around them.
    reorder(this.node, toNodes(this._render(job, ctx, opened?.open ?? false)));
  }

  dispose(): void {
    this.node.removeEventListener('click', this._onClick);
    this.node.remove();
  }

  private _render(job: IJob, ctx: ICardContext, resizesOpen: boolean): Child[] {
    const full = this.options.detail === 'full';
    const mine = ctx.me !== null && job.user === ctx.me.user;
    const mayAct = ctx.me !== null && (mine || ctx.me.admin);
    const title = job.name ?? (mine ? job.id : `a job of ${job.user}`);
    const forecast = mayAct ? startOfForecast(job) : null;
    return [
      h(
        'div',
        { class: 'jp-ElasticGpu-jobHead' },
        h('span', { class: 'jp-ElasticGpu-state', 'data-state': job.state }, job.state),
        h('span', { class: 'jp-ElasticGpu-jobName', title: `${title} (${job.id})` }, title),
        // A notebook kernel's GPUs (docs/interactive-gpus.md): held while the kernel lives.
        isLease(job)
          ? h(
              'span',
              {
                class: 'jp-ElasticGpu-lease',
                title:
                  'A notebook kernel holds these GPUs; they are released when it shuts down or stays idle'
              },
              'interactive lease'
            )
          : null
      ),
      h('div', { class: 'jp-ElasticGpu-jobMeta' }, metaLine(job)),
      progressLine(job),
      full ? noiseLine(job) : null,
      trainerNote(job),
      reasonLine(job, forecast),
      mayAct ? forecastLine(job, ctx, forecast) : null,
      errorBlock(job),
      full ? this._chart(ctx) : null,
      resizeBlock(job, full, ctx.now, resizesOpen),
      full && job.state === 'done' && job.model_path
        ? h('div', { class: 'jp-ElasticGpu-note' }, `Model saved to ${job.model_path}`)
        : null,
      this._actions(job, ctx, mayAct)
    ];
  }

  private _actions(job: IJob, ctx: ICardContext, mayAct: boolean): Child {
    const wanted: HTMLButtonElement[] = [];
    // The same element for an action across redraws (progress redraws the card every few
    // seconds): a press and a release on two different buttons make no click, and a person's
    // Cancel would be lost.
    const button = (action: JobAction, label: string, title: string): HTMLButtonElement => {
      let b = this._buttons.get(action);
      if (!b) {
        b = h('button', { class: 'jp-ElasticGpu-button', 'data-action': action });
        this._buttons.set(action, b);
      }
      if (b.textContent !== label) {
        b.textContent = label;
      }
      b.title = title;
      b.disabled = this._pending.has(action);
      return b;
    };
    // A lease launches nothing: it has no log to show.
    if (mayAct && !isLease(job)) {
      wanted.push(button('logs', 'Log', 'Open the live log of this job'));
    }
    if (ctx.canOpenNotebook && job.notebook) {
      wanted.push(
        button('open-notebook', 'Notebook', `Open ${job.notebook}, which submitted this job`)
      );
    }
    if (mayAct && !isFinal(job.state) && isLease(job)) {
      wanted.push(
        button('cancel', 'Release', 'Give these GPUs back: the kernel restarts without them')
      );
    } else if (mayAct && !isFinal(job.state)) {
      wanted.push(
        job.held
          ? button(
              'resume',
              'Resume',
              'Let this job have GPUs again: it resumes from its checkpoint'
            )
          : button(
              'suspend',
              'Suspend',
              'Checkpoint and stop this job, and hold it (no GPUs) until you resume it'
            )
      );
      wanted.push(
        button('cancel', 'Cancel', 'Checkpoint and stop this job (it cannot be resumed)')
      );
    }
    for (const [action, b] of this._buttons) {
      if (!wanted.includes(b)) {
        this._buttons.delete(action);
      }
    }
    if (!wanted.length) {
      return null;
    }
    reorder(this._actionBox, wanted);
    return this._actionBox;
  }

  private _chart(ctx: ICardContext): Child {
    const chart = lossChart(ctx.progress ?? []);
    if (!chart) {
      return null;
    }
    return h('figure', { class: 'jp-ElasticGpu-chart' }, chart);
  }

  private _onClick = (event: MouseEvent): void => {
    const target = (event.target as HTMLElement).closest('[data-action]') as HTMLElement | null;
    if (!target || !this._job || !this.node.contains(target)) {
      return;
    }
    const action = target.dataset.action as JobAction;
    if (action === 'cancel' || action === 'suspend' || action === 'resume') {
      this._pending.add(action);
      (target as HTMLButtonElement).disabled = true;
    }
    this.options.onAction(action, this._job);
  };

  /** Re-enable a button whose action failed. */
  settle(action: JobAction): void {
    this._pending.delete(action);
    this._key = '';
    const button = this.node.querySelector(`[data-action="${action}"]`) as HTMLButtonElement;
    if (button) {
      button.disabled = false;
    }
  }

  private readonly _actionBox = h('div', { class: 'jp-ElasticGpu-actions' });
  private readonly _buttons = new Map<JobAction, HTMLButtonElement>();
  private _job: IJob | null = null;
  private _key = '';
  private _pending = new Set<JobAction>();
}

interface IStartSplit {
  /** The reason without the forecast's figures (what the reason line shows). */
  reason: string;
  /** The job whose end the start waits for, if the forecast says. */
  after: IJobRef | null;
  /** The kind of GPU it starts on, where kinds are mixed. */
  kind: string | null;
}

/**
 * A queued job's reason split from its forecast (`start_in_s`, `start_kind`, `start_after`),
 * when the card shows the start time: the card's "Starts about 14:03 (in 3 min)" line says
 * when, to the minute and kept current, so the reason line leaves it out.
 */
function startOfForecast(job: IJob): IStartSplit | null {
  const figures = job.reason_figures;
  if (
    job.state !== 'queued' ||
    typeof job.estimated_start !== 'number' ||
    !job.reason_kind ||
    typeof figures?.start_in_s !== 'number'
  ) {
    return null;
  }
  const { start_in_s: _in, start_after: after, start_kind: kind, ...rest } = figures;
  return {
    reason: reasonAfterState(job.state, job.reason_kind, rest),
    after: after ?? null,
    kind: kind ?? null
  };
}

/** The reason beside the job's badge, without the state the badge says. */
function shownReason(job: IJob): string {
  if (!job.reason_kind) {
    return (job.reason ?? '').trim(); // from a scheduler that sends no kind: as it came
  }
  return reasonAfterState(job.state, job.reason_kind, job.reason_figures);
}

function reasonLine(job: IJob, forecast: IStartSplit | null): Child {
  const text = forecast ? forecast.reason : shownReason(job);
  if (!text) {
    return null;
  }
  // The whole sentence, as the scheduler said it, on hover.
  const whole = forecast ? (job.reason ?? undefined) : undefined;
  return h('div', { class: 'jp-ElasticGpu-reason', title: whole }, text);
}

function isLease(job: IJob): boolean {
  return job.kind === 'interactive';
}

function metaLine(job: IJob): string {
  const parts = [job.user];
  // a job on a MIG instance holds and asks for a slice, not GPUs
  const slice = job.mig ? `a ${job.mig} MIG slice` : null;
  if (job.gpus && job.gpus.length) {
    parts.push(`holds ${slice ?? plural(job.gpus.length, 'GPU')} (${gpuList(job.gpus)})`);
  }
  const range = slice ?? gpuRange(job);
  if (range) {
    parts.push(`asks ${range}`);
  }
  if (job.state === 'queued' && typeof job.position === 'number') {
    parts.push(`#${job.position} in the queue`);
  }
  const framework = frameworkText(job);
  if (framework) {
    parts.push(framework);
  }
  return parts.join(' \u00b7 ');
}

/**
 * The framework that trains a script job, as its text view says it (`notebook/text.py`):
 * "framework lightning", "framework torchrun, not elastic" (its count never changes: the job's
 * notes say why); null for a job without one.
 */
function frameworkText(job: IJob): string | null {
  if (!job.framework) {
    return null;
  }
  return job.elastic === false
    ? `framework ${job.framework}, not elastic`
    : `framework ${job.framework}`;
}

/**
 * What the job's framework adapter says of the run (a Trainer argument the grant overrides, a
 * batch policy it cannot honour as asked), while it runs, as the text view says it.
 */
function trainerNote(job: IJob): Child {
  const note = job.progress?.note;
  if (!note || isFinal(job.state)) {
    return null;
  }
  return h('div', { class: 'jp-ElasticGpu-note', 'data-trainer-note': '' }, `trainer: ${note}`);
}

/**
 * What the job's gradient noise scale says of its batch (jobs that measure it), as the text view
 * says it (`notebook/text.py`, `noise_text`): a batch of B samples makes phi / (phi + B) of the
 * use of each sample that a small batch makes.
 */
export function noiseText(job: IJob): string | null {
  if (!job.measure_noise) {
    return null;
  }
  const p = job.progress;
  const scale = p?.noise_scale;
  const pairs = p?.noise_steps ?? 0;
  if (typeof scale !== 'number') {
    if (pairs) {
      return (
        `gradient noise scale: not measurable yet (${plural(pairs, 'step pair')}: ` +
        "the gradient's signal reads as zero under its noise)"
      );
    }
    return isFinal(job.state) ? null : 'gradient noise scale: measuring';
  }
  let text = `gradient noise scale ${Math.round(scale).toLocaleString('en-US')} samples (from ${plural(pairs, 'step pair')})`;
  const batch = p?.batch_size;
  if (typeof batch === 'number' && batch > 0) {
    const share = Math.round((100 * scale) / (scale + batch));
    text += `: batch ${batch.toLocaleString('en-US')} makes ${share}% of the use of each sample that a small batch makes`;
  }
  return text;
}

function noiseLine(job: IJob): Child {
  const text = noiseText(job);
  return text ? h('div', { class: 'jp-ElasticGpu-note', 'data-noise-scale': '' }, text) : null;
}

function progressLine(job: IJob): Child {
  const p = job.progress;
  if (!p) {
    return null;
  }
  const parts: string[] = [];
  const fraction = job.state === 'done' ? 1 : p.fraction;
  if (typeof fraction === 'number') {
    parts.push(percent(fraction));
  }
  const epoch = epochText(job);
  if (epoch) {
    parts.push(epoch);
  }
  if (typeof p.loss === 'number') {
    parts.push(`loss ${Number(p.loss.toPrecision(3))}`);
  }
  if (typeof p.samples_per_s === 'number' && !isFinal(job.state)) {
    parts.push(`${Math.round(p.samples_per_s)} samples/s`);
  }
  if (typeof job.eta_s === 'number' && !isFinal(job.state) && !job.estimated_end) {
    parts.push(`about ${duration(job.eta_s)} left`);
  }
  return h(
    'div',
    { class: 'jp-ElasticGpu-progress' },
    typeof fraction === 'number'
      ? h(
          'div',
          {
            class: 'jp-ElasticGpu-bar',
            role: 'progressbar',
            'aria-valuemin': 0,
            'aria-valuemax': 100,
            'aria-valuenow': Math.round(fraction * 100)
          },
          h('div', {
            class: 'jp-ElasticGpu-barFill',
            style: `width: ${Math.round(Math.min(1, Math.max(0, fraction)) * 100)}%`
          })
        )
      : null,
    h('span', {}, parts.join(' \u00b7 '))
  );
}

/** What the card says of the end of a running job while the API says `estimating`. */
export const ESTIMATING_END = 'Ends: estimating\u2026';

/** When the scheduler expects the job to start and to end (the API gives owners these). */
function forecastLine(job: IJob, ctx: ICardContext, forecast: IStartSplit | null): Child {
  if (isFinal(job.state)) {
    return null;
  }
  const now = ctx.now;
  const at = (t: number): string => `about ${clock(t, now)} (${relative(t, now)})`;
  const parts: string[] = [];
  if (job.state === 'queued' && job.estimated_start !== undefined) {
    const first = forecast?.after;
    const name = first ? ctx.nameOf?.(first.id) || first.name || first.id : null;
    const after = name ? `, when ${name} finishes` : '';
    const on = forecast?.kind ? ` on ${forecast.kind}` : '';
    parts.push(
      job.estimated_start === null
        ? 'No start time can be estimated yet.'
        : `Starts ${at(job.estimated_start)}${on}${after}.`
    );
  }
  // A lease ends when its kernel does (or idles): no forecast can say when.
  if (typeof job.estimated_end === 'number' && !isLease(job)) {
    parts.push(`Ends ${at(job.estimated_end)}.`);
  } else if (job.estimating && job.state !== 'queued' && !isLease(job)) {
    parts.push(ESTIMATING_END); // the scheduler does not trust its estimate yet
  }
  return parts.length ? h('div', { class: 'jp-ElasticGpu-start' }, parts.join(' ')) : null;
}

function errorBlock(job: IJob): Child {
  if (!job.error) {
    return null;
  }
  return h(
    'div',
    { class: 'jp-ElasticGpu-error' },
    `${job.error.type}: ${job.error.message}`,
    job.error.hint ? h('div', { class: 'jp-ElasticGpu-hint' }, job.error.hint) : null
  );
}

/** A grant change as people say it: started on, resized from/to, released. */
function changeText(history: readonly IGrantChange[], i: number, now: number): string {
  const c = history[i];
  const before = i > 0 ? history[i - 1].gpus.length : 0;
  const after = c.gpus.length;
  let what: string;
  if (after === 0) {
    what = 'released its GPUs';
  } else if (before === 0) {
    what = `started on ${plural(after, 'GPU')} (${gpuList(c.gpus)})`;
  } else if (before === after) {
    what = `moved to GPUs ${gpuList(c.gpus)}`;
  } else {
    what = `resized from ${before} to ${plural(after, 'GPU')} (${gpuList(c.gpus)})`;
  }
  return `${clock(c.t, now)}: ${what}: ${c.why}`;
}

/** The grant changes: all in a full card (`open` as left); the last in the sidebar, if resized. */
function resizeBlock(job: IJob, full: boolean, now: number, open: boolean): Child {
  const history = job.history ?? [];
  const resizes = job.resizes ?? 0;
  const all = history.map((_, i) => changeText(history, i, now));
  if (!full) {
    if (!resizes || !history.length) {
      return null;
    }
    return h(
      'div',
      { class: 'jp-ElasticGpu-resizes', title: all.join('\n') },
      `${plural(resizes, 'resize')}; last ${all[all.length - 1]}`
    );
  }
  if (!history.length) {
    return null;
  }
  return h(
    'details',
    { class: 'jp-ElasticGpu-resizes', open },
    h('summary', {}, `${plural(resizes, 'resize')}, ${plural(history.length, 'grant change')}`),
    h('ol', {}, ...all.map(text => h('li', {}, text)))
  );
}
