/**
 * The admin page's table rows, drawn from the API's documents: GPUs, jobs, and usage against
 * share. Words and numbers come from the sidebar's formatting (`../format`), so both front
 * ends say a GPU count, a duration or a state the same way; what a button does is the
 * caller's (`IAdminSteering`). Text from the server goes in as text, never as HTML.
 */
import { Child, h } from '../dom';
import { duration, figure, gpuList, gpuRange, memory, percent, plural } from '../format';
import { slicesReport } from '../gpuview';
import { reasonAfterState } from '../reasons';
import { IGpu, IJob, isFinal, IShareGroup, IShares, IShareUser } from '../types';

/** A job's reason beside its state, made from its kind and figures (its text from a server
 * that sends no kind). */
function reasonText(job: IJob): string {
  return job.reason_kind
    ? reasonAfterState(job.state, job.reason_kind, job.reason_figures)
    : (job.reason ?? '');
}

/** What a cell shows when there is nothing to show. */
export const NONE = '\u2013';

/** What the page's buttons and fields ask for; each settles once the page is drawn again. */
export interface IAdminSteering {
  drain(gpu: IGpu, drained: boolean): Promise<void>;
  suspend(job: IJob): Promise<void>;
  resume(job: IJob): Promise<void>;
  cancel(job: IJob): Promise<void>;
  setPriority(job: IJob, priority: number): Promise<void>;
  setWeight(group: string, weight: number): Promise<void>;
}

const maybe = (x: number | null | undefined, show: (x: number) => string): string =>
  x === null || x === undefined ? NONE : show(x);

function button(action: string, label: string, onClick: () => Promise<void>, danger = false) {
  const el = h('button', { 'data-action': action, class: danger ? 'danger' : undefined }, label);
  el.addEventListener('click', () => void onClick());
  return el;
}

/**
 * A number field and its Set button (`data-action` is `action`; Enter sets too); its
 * `data-key` keeps what is typed in it across redraws.
 */
function numberField(
  action: string,
  of: string,
  value: number | undefined,
  max: number,
  set: (value: number) => Promise<void>
): Child[] {
  const input = h('input', {
    type: 'number',
    min: '0.01',
    max: String(max),
    step: 'any',
    value: value,
    'data-key': `${action}-${of}`,
    'aria-label': `${action} of ${of}`
  });
  const send = () => set(Number(input.value));
  input.addEventListener('keydown', e => {
    if (e.key === 'Enter') {
      void send();
    }
  });
  return [input, ' ', button(action, 'Set', send)];
}

const badge = (kind: string, text: string, title?: string) =>
  h('span', { class: `jp-ElasticAdmin-badge ${kind}`, title }, text);

function td(attrs: Record<string, string | number>, ...children: Child[]) {
  return h('td', attrs, ...children);
}

/** A GPU in MIG mode: one line per instance, its profile and who holds it. */
function sliceLines(gpu: IGpu): Child[] {
  if (!gpu.mig?.length) {
    return ['MIG: no instances'];
  }
  return gpu.mig.map(s =>
    h(
      'div',
      { class: 'slice', 'data-slice-uuid': s.uuid, title: s.uuid },
      `${s.profile}: ${s.holder ? `${s.holder_user}: ${s.holder_name || s.holder}` : 'free'}` +
        (typeof s.utilization === 'number' ? ` (${percent(s.utilization)})` : '')
    )
  );
}

export function gpuRow(gpu: IGpu, steer: IAdminSteering): HTMLTableRowElement {
  const states: Child[] = [];
  if (gpu.drained) {
    states.push(badge('drained', gpu.holder ? 'draining' : 'drained'));
  }
  if (gpu.healthy === false) {
    const users = [...new Set((gpu.external_processes ?? []).map(p => p.user || 'unknown'))];
    states.push(
      badge('busy', `busy (${users.join(', ')})`, 'processes the scheduler did not start')
    );
  }
  if (!states.length) {
    states.push(gpu.holder ? 'in use' : 'free');
  }
  const holder: Child[] = gpu.mig
    ? sliceLines(gpu)
    : [gpu.holder ? `${gpu.holder_user}: ${gpu.holder_name || gpu.holder}` : NONE];
  // NVML reports no utilisation for a GPU in MIG mode; its instances' (with GPU performance
  // monitoring, Hopper and later) are on their lines
  const util =
    gpu.mig && typeof gpu.utilization !== 'number'
      ? slicesReport(gpu)
        ? 'per slice (MIG)'
        : 'not reported (MIG)'
      : maybe(gpu.utilization, percent);
  const total = gpu.memory_total_mb;
  const used = total ? `${memory(gpu.memory_used_mb ?? 0)} / ${memory(total)}` : NONE;
  const drain = gpu.drained
    ? button('undrain', 'Undrain', () => steer.drain(gpu, false))
    : button('drain', 'Drain', () => steer.drain(gpu, true), true);
  return h(
    'tr',
    { 'data-gpu-id': gpu.id },
    td({}, gpu.id),
    td({}, gpu.name ?? NONE),
    td({}, ...holder),
    td({}, util),
    td({}, used),
    td({ class: 'state' }, ...states),
    td({}, drain)
  );
}

/** Open jobs first, oldest first; then finished ones, the latest first. */
export function sortJobs(jobs: readonly IJob[]): IJob[] {
  return [...jobs].sort((a, b) => {
    const fa = isFinal(a.state);
    const fb = isFinal(b.state);
    if (fa !== fb) {
      return fa ? 1 : -1;
    }
    return fa
      ? (b.finished_at ?? 0) - (a.finished_at ?? 0)
      : (a.submitted_at ?? 0) - (b.submitted_at ?? 0);
  });
}

function jobButtons(job: IJob, steer: IAdminSteering): Child[] {
  if (isFinal(job.state)) {
    return [];
  }
  const buttons: Child[] = [];
  if (job.held) {
    buttons.push(button('resume', 'Resume', () => steer.resume(job)));
  } else if (job.state !== 'stopping') {
    buttons.push(button('suspend', 'Suspend', () => steer.suspend(job)));
  }
  buttons.push(button('cancel', 'Cancel', () => steer.cancel(job), true));
  return buttons;
}

export function jobRow(job: IJob, steer: IAdminSteering): HTMLTableRowElement {
  const range = gpuRange(job);
  const priority: Child[] = isFinal(job.state)
    ? [maybe(job.priority, figure)]
    : numberField('priority', job.id, job.priority, 100, p => steer.setPriority(job, p));
  return h(
    'tr',
    { 'data-job-id': job.id, 'data-state': job.state },
    td({}, job.id),
    td({}, job.user),
    td({}, job.name || NONE),
    td({ class: 'state' }, job.state, ...(job.held ? [' ', badge('held', 'held')] : [])),
    td({}, gpuList(job.gpus), range ? ` (${range})` : null),
    td({}, ...priority),
    td({ class: 'reason' }, reasonText(job)),
    td({}, ...jobButtons(job, steer))
  );
}

export function userRow(u: IShareUser): HTMLTableRowElement {
  return h(
    'tr',
    { 'data-user': u.user },
    td({}, u.user),
    td({}, u.groups.join(', ') || NONE),
    td({}, figure(u.weight)),
    td({}, percent(u.share)),
    td({}, String(u.entitled_gpus)),
    td({}, String(u.gpus)),
    td({}, percent(u.usage_fraction)),
    td({}, `${figure(u.ratio)}\u00d7`)
  );
}

export function groupRow(g: IShareGroup, steer: IAdminSteering): HTMLTableRowElement {
  return h(
    'tr',
    { 'data-group': g.group },
    td({}, g.group),
    td({}, ...numberField('weight', g.group, g.weight, 1000, w => steer.setWeight(g.group, w))),
    td({}, g.users.join(', ') || NONE),
    td({}, String(g.gpus)),
    td({}, percent(g.usage_fraction))
  );
}

export function sharesNote(doc: IShares): string {
  return `${plural(doc.gpus, 'usable GPU')}; usage decays with a half-life of ${duration(doc.half_life_s)}.`;
}

/** Tables with one of their buttons pressed now, and the redraw that waits for its release. */
const pressed = new Map<HTMLTableElement, (() => void) | null>();

/**
 * Hold `table`'s redraws while one of its buttons is pressed: a press on a button and its
 * release on the copy drawn in between make no click, and redraws come every few seconds.
 */
function holdWhilePressed(table: HTMLTableElement): void {
  if (table.dataset.holdsPresses !== undefined) {
    return;
  }
  table.dataset.holdsPresses = '';
  table.addEventListener('pointerdown', e => {
    if ((e.target as Element).closest?.('button')) {
      pressed.set(table, null);
    }
  });
  const release = (): void => {
    const redraw = pressed.get(table);
    pressed.delete(table);
    if (redraw) {
      setTimeout(redraw, 0); // after the click this release makes
    }
  };
  table.ownerDocument.addEventListener('pointerup', release);
  table.ownerDocument.addEventListener('pointercancel', release);
}

/**
 * Make a table's rows `rows` (or one that says `empty`), keeping what is being typed into a
 * field of it: a redraw comes at every change of the scheduler's state. While one of its
 * buttons is pressed, the redraw waits for the release.
 */
export function fill(
  table: HTMLTableElement,
  rows: HTMLTableRowElement[],
  columns: number,
  empty: string
): void {
  holdWhilePressed(table);
  if (pressed.has(table)) {
    pressed.set(table, () => fill(table, rows, columns, empty));
    return;
  }
  const body = table.tBodies[0];
  const focused = table.ownerDocument.activeElement as HTMLInputElement | null;
  const key = focused && body.contains(focused) ? focused.dataset.key : undefined;
  const typed = key ? focused!.value : '';
  body.replaceChildren(
    ...(rows.length ? rows : [h('tr', {}, td({ class: 'empty', colspan: columns }, empty))])
  );
  if (key) {
    const again = [...body.querySelectorAll<HTMLInputElement>('input[data-key]')].find(
      el => el.dataset.key === key
    );
    if (again) {
      again.value = typed;
      again.focus();
    }
  }
}
