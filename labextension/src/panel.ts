/**
 * The sidebar: GPUs, the queue in the policy's order, the caller's recent jobs, or a message
 * saying why there is nothing to show. It holds the shared model only while it is visible,
 * and redraws at most once per animation frame, touching only the GPUs and jobs that changed.
 * The element names and attributes it renders are a contract (docs/sidebar.md).
 */
import { IDisposable } from '@lumino/disposable';

import { h, reorder } from './dom';
import { OnScreenWidget } from './onscreen';
import { GpuTile } from './gpuview';
import { ICardContext, JobAction, JobCard, RELATIVE_TIME_STEP } from './jobcard';
import { ElasticGpuModel } from './model';
import { queueJobs, recentJobs } from './state';
import { gpuIcon } from './icon';
import { IJob, PanelProblem } from './types';

/** The panel's Lumino id: its tab is `[data-id="elastic-gpu-queue"]`. */
export const PANEL_ID = 'elastic-gpu-queue';

/** How many finished jobs of the caller the Recent list shows. */
export const RECENT_SHOWN = 20;

/** The window of the utilisation charts, in ms. */
const UTIL_WINDOW_MS = 5 * 60 * 1000;

export interface IJobActionHandler {
  /** Carry out a card's action; the promise settles when it is done (or failed). */
  run(action: JobAction, job: IJob): Promise<void>;
  readonly canOpenNotebook: boolean;
}

export class QueuePanel extends OnScreenWidget {
  constructor(
    private readonly model: ElasticGpuModel,
    private readonly actions: IJobActionHandler
  ) {
    super();
    this.id = PANEL_ID;
    this.addClass('jp-ElasticGpu-panel');
    this.title.icon = gpuIcon;
    this.title.caption = 'GPU queue';
    this._recent.open = false;
    this.node.append(
      h(
        'header',
        { class: 'jp-ElasticGpu-header' },
        h('h2', { class: 'jp-ElasticGpu-title' }, 'GPU queue'),
        this._badges
      ),
      this._message,
      this._gpuSection,
      this._queueSection,
      this._recent
    );
    this._gpuSection.append(this._gpuTitle, this._gpuGrid);
    this._queueSection.append(this._queueTitle, this._queueList);
    this._recent.append(this._recentTitle, this._recentList);
    model.changed.connect(this._schedule, this);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.offScreen();
    this.model.changed.disconnect(this._schedule, this);
    super.dispose();
  }

  /** Draw now (tests and benchmarks call it; views normally wait for the next frame). */
  render(): void {
    this._frame = 0;
    const started = performance.now();
    const model = this.model;
    const data = model.data;
    const problem = model.problem;
    this._renderBadges();
    const blocking = problem !== null;
    this._setMessage(this._message, blocking ? problem.kind : null, problem?.message ?? '');
    if (!blocking && data.queue === null) {
      this._message.hidden = false;
      this._message.textContent = 'Loading the GPUs and the queue\u2026';
    }
    const ready = !blocking && data.queue !== null;
    this._gpuSection.hidden = !ready;
    this._queueSection.hidden = !ready;
    this._recent.hidden = !ready;
    if (ready) {
      const ctx: ICardContext = {
        me: model.whoami,
        canOpenNotebook: this.actions.canOpenNotebook,
        now: Date.now(),
        nameOf: id => data.jobs.get(id)?.name
      };
      this._renderGpus(ctx);
      const open = queueJobs(data);
      this._queueTitle.textContent = `Queue (${open.length})`;
      this._renderCards(this._queueList, this._queueCards, open, ctx, 'No jobs running or queued.');
      const recent = recentJobs(data, model.whoami?.user ?? null, RECENT_SHOWN);
      this._recentTitle.textContent = `Recent (${recent.length})`;
      this._renderCards(this._recentList, this._recentCards, recent, ctx, 'No finished jobs.');
    }
    this.node.dataset.version = data.version === null ? '' : String(data.version);
    this.node.dataset.renderMs = (performance.now() - started).toFixed(2);
  }

  protected onScreen(): void {
    if (!this._acquired) {
      this._acquired = this.model.acquire();
      this._ticker = setInterval(() => this._schedule(), RELATIVE_TIME_STEP);
    }
    this.render();
  }

  protected offScreen(): void {
    this._acquired?.dispose();
    this._acquired = null;
    if (this._ticker !== null) {
      clearInterval(this._ticker);
      this._ticker = null;
    }
  }

  private _schedule(): void {
    if (this._frame || !this.isVisible) {
      return;
    }
    this._frame = requestAnimationFrame(() => this.render());
  }

  private _renderBadges(): void {
    const model = this.model;
    const badges: HTMLElement[] = [];
    if (model.data.source === 'simulated') {
      badges.push(
        h(
          'span',
          {
            class: 'jp-ElasticGpu-badge',
            'data-badge': 'simulated',
            title: 'These GPUs are simulated: logical CPU devices, no real GPU'
          },
          'simulated GPUs'
        )
      );
    }
    const transport = model.transport;
    const label = { push: 'live', poll: 'polling', standby: 'paused' }[transport];
    badges.push(
      h(
        'span',
        {
          class: 'jp-ElasticGpu-badge',
          'data-transport': transport,
          title:
            transport === 'push'
              ? 'Updates are pushed by the server'
              : transport === 'poll'
                ? 'The push channel is down: polling'
                : 'Paused while hidden'
        },
        label
      )
    );
    const who = model.whoami;
    if (who) {
      badges.push(
        h('span', { class: 'jp-ElasticGpu-user' }, who.admin ? `${who.user} (admin)` : who.user)
      );
    }
    const key = badges.map(b => b.outerHTML).join('');
    if (key !== this._badgeKey) {
      this._badgeKey = key;
      this._badges.replaceChildren(...badges);
    }
  }

  private _setMessage(el: HTMLElement, kind: PanelProblem | null, text: string): void {
    el.hidden = kind === null;
    if (kind === null) {
      delete el.dataset.panelMessage;
      el.textContent = '';
      return;
    }
    el.dataset.panelMessage = kind;
    el.textContent = text;
  }

  private _renderGpus(ctx: ICardContext): void {
    const gpus = this.model.data.gpus ?? [];
    this._gpuTitle.textContent = `GPUs (${gpus.length})`;
    this._setMessage(
      this._noGpus,
      gpus.length ? null : 'no-gpus',
      'No GPUs: this server has no GPU the scheduler can use (no NVIDIA driver found, and ' +
        'simulated GPUs are off). Jobs stay queued until GPUs appear.'
    );
    const now = Date.now();
    const seen = new Set<string>();
    const nodes: HTMLElement[] = gpus.length ? [] : [this._noGpus];
    for (const gpu of gpus) {
      let tile = this._gpuTiles.get(gpu.id);
      if (!tile) {
        tile = new GpuTile();
        this._gpuTiles.set(gpu.id, tile);
      }
      tile.update(gpu, this.model.utilisation(gpu.id), UTIL_WINDOW_MS, now, ctx.me);
      seen.add(gpu.id);
      nodes.push(tile.node);
    }
    for (const [id, tile] of this._gpuTiles) {
      if (!seen.has(id)) {
        tile.dispose();
        this._gpuTiles.delete(id);
      }
    }
    reorder(this._gpuGrid, nodes);
    this._renderIdle(this.model.data.idle);
  }

  /** The scheduler's word on GPUs no job gets, under the grid; gone when there are none. */
  private _renderIdle(idle: string | null): void {
    const line = this._idleLine;
    if (!idle) {
      line.remove();
      return;
    }
    if (line.textContent !== idle) {
      line.textContent = idle;
      line.dataset.idleReason = idle;
    }
    if (line.parentElement !== this._gpuSection) {
      this._gpuSection.append(line);
    }
  }

  private _renderCards(
    list: HTMLElement,
    cards: Map<string, JobCard>,
    jobs: IJob[],
    ctx: ICardContext,
    empty: string
  ): void {
    const seen = new Set<string>();
    const nodes: HTMLElement[] = [];
    for (const job of jobs) {
      let card = cards.get(job.id);
      if (!card) {
        card = new JobCard({
          detail: 'compact',
          onAction: (action, j) => this._run(action, j, cards)
        });
        cards.set(job.id, card);
      }
      card.update(job, ctx);
      seen.add(job.id);
      nodes.push(card.node);
    }
    for (const [id, card] of cards) {
      if (!seen.has(id)) {
        card.dispose();
        cards.delete(id);
      }
    }
    if (!nodes.length) {
      nodes.push(h('div', { class: 'jp-ElasticGpu-empty' }, empty));
    }
    reorder(list, nodes);
  }

  private _run(action: JobAction, job: IJob, cards: Map<string, JobCard>): void {
    void this.actions.run(action, job).catch(() => cards.get(job.id)?.settle(action));
  }

  private _acquired: IDisposable | null = null;
  private _ticker: ReturnType<typeof setInterval> | null = null;
  private _frame = 0;
  private _badgeKey = '';
  private _badges = h('div', { class: 'jp-ElasticGpu-badges' });
  private _message = h('div', { class: 'jp-ElasticGpu-message', role: 'status' });
  private _noGpus = h('div', { class: 'jp-ElasticGpu-message' });
  private _gpuSection = h('details', { class: 'jp-ElasticGpu-section', open: true });
  private _gpuTitle = h('summary', { class: 'jp-ElasticGpu-sectionTitle' });
  private _gpuGrid = h('div', { class: 'jp-ElasticGpu-gpus' });
  private _idleLine = h('div', {
    class: 'jp-ElasticGpu-idle',
    role: 'note',
    title: 'Why the scheduler gives these GPUs to no job, with the figures it decided on'
  });
  private _queueSection = h('details', { class: 'jp-ElasticGpu-section', open: true });
  private _queueTitle = h('summary', { class: 'jp-ElasticGpu-sectionTitle' });
  private _queueList = h('div', { class: 'jp-ElasticGpu-jobs' });
  private _recent = h('details', { class: 'jp-ElasticGpu-section jp-ElasticGpu-recent' });
  private _recentTitle = h('summary', { class: 'jp-ElasticGpu-sectionTitle' });
  private _recentList = h('div', { class: 'jp-ElasticGpu-jobs' });
  private _gpuTiles = new Map<string, GpuTile>();
  private _queueCards = new Map<string, JobCard>();
  private _recentCards = new Map<string, JobCard>();
}
