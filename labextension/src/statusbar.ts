/**
 * The status-bar item: "GPUs 3/4 in use · 1 queued" at a glance, the GPU queue sidebar on a
 * click. It holds the page's model live while it is on screen (the status bar shown), and hides
 * on a server without the scheduler. Its attributes are part of the DOM contract
 * (docs/sidebar.md).
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { h } from './dom';
import { plural } from './format';
import { gpuState } from './gpuview';
import { ElasticGpuModel } from './model';
import { OnScreenWidget } from './onscreen';
import { IPanelData } from './state';

/** The item's Lumino id (and the DOM id of its node). */
export const STATUS_ITEM_ID = 'elastic-gpu-status';

/** The counts the item shows. */
export interface IGpuSummary {
  /** GPUs held by jobs or busy with processes outside the scheduler. */
  used: number;
  total: number;
  /** Of `used`, those held by the caller's jobs. */
  mine: number;
  running: number;
  queued: number;
}

/** The counts of a state, or null until the GPUs and the queue are known. */
export function gpuSummary(data: IPanelData, user: string | null): IGpuSummary | null {
  if (data.gpus === null || data.queue === null) {
    return null;
  }
  const used = data.gpus.filter(g => gpuState(g) !== 'free');
  const queued = data.queue.filter(e => e.state === 'queued').length;
  return {
    used: used.length,
    total: data.gpus.length,
    mine: user === null ? 0 : used.filter(g => g.holder && g.holder_user === user).length,
    running: data.queue.length - queued,
    queued
  };
}

/** "GPUs 3/4 in use · 1 queued" (no queued part when none waits). */
export function summaryText(s: IGpuSummary): string {
  if (!s.total) {
    return 'No GPUs';
  }
  const queued = s.queued ? ` \u00b7 ${s.queued} queued` : '';
  return `GPUs ${s.used}/${s.total} in use${queued}`;
}

/** The tooltip: the same counts in words, and what a click does. */
export function summaryTitle(s: IGpuSummary): string {
  const mine = s.mine ? ` (${s.mine} by your jobs)` : '';
  return (
    `${s.used} of ${plural(s.total, 'GPU')} in use${mine}; ` +
    `${plural(s.running, 'job')} running, ${s.queued} queued. Click to show the GPU queue.`
  );
}

/** What the item reads of the page's model. */
export type StatusModel = Pick<
  ElasticGpuModel,
  'changed' | 'data' | 'whoami' | 'problem' | 'acquire'
>;

export class GpuStatusItem extends OnScreenWidget {
  constructor(
    private readonly model: StatusModel,
    private readonly onOpen: () => void
  ) {
    super({ node: h('div', { role: 'button', tabindex: '0' }) });
    this.id = STATUS_ITEM_ID;
    this.addClass('jp-ElasticGpu-status');
    this.addClass('jp-mod-highlighted');
    this.node.append(this._text);
    this.node.addEventListener('click', this._open);
    this.node.addEventListener('keydown', this._onKey);
    model.changed.connect(this._onChange, this);
  }

  /** False on a server without the scheduler: the status bar hides the item. */
  get relevant(): boolean {
    return this.model.problem?.kind !== 'not-enabled';
  }

  /** Emitted when `relevant` changes. */
  get relevantChanged(): ISignal<this, void> {
    return this._relevantChanged;
  }

  /** Draw now. */
  render(): void {
    const model = this.model;
    const summary = gpuSummary(model.data, model.whoami?.user ?? null);
    const node = this.node;
    let text: string;
    let title: string;
    if (model.problem) {
      text = 'GPUs: unavailable';
      title = model.problem.message;
    } else if (!summary) {
      text = 'GPUs \u2026';
      title = 'Loading the GPUs and the queue';
    } else {
      text = summaryText(summary);
      title = summaryTitle(summary);
    }
    this._text.textContent = text;
    node.title = title;
    const attrs: Record<string, string> = summary
      ? {
          gpusUsed: String(summary.used),
          gpusTotal: String(summary.total),
          jobsQueued: String(summary.queued)
        }
      : {};
    for (const name of ['gpusUsed', 'gpusTotal', 'jobsQueued']) {
      if (name in attrs) {
        node.dataset[name] = attrs[name];
      } else {
        delete node.dataset[name];
      }
    }
    node.dataset.version = model.data.version === null ? '' : String(model.data.version);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.offScreen();
    this.model.changed.disconnect(this._onChange, this);
    super.dispose();
  }

  protected onScreen(): void {
    if (!this._acquired && this.relevant) {
      this._acquired = this.model.acquire();
    }
    this.render();
  }

  protected offScreen(): void {
    this._acquired?.dispose();
    this._acquired = null;
  }

  private _onChange(): void {
    const relevant = this.relevant;
    if (relevant !== this._wasRelevant) {
      this._wasRelevant = relevant;
      if (!relevant) {
        this.offScreen(); // nothing will ever come: ask nothing more
      }
      this._relevantChanged.emit();
    }
    if (this.isVisible) {
      this.render();
    }
  }

  private _open = (): void => this.onOpen();

  private _onKey = (event: KeyboardEvent): void => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      this.onOpen();
    }
  };

  private _text = h('span', { class: 'jp-StatusBar-TextItem' });
  private _acquired: IDisposable | null = null;
  private _wasRelevant = true;
  private _relevantChanged = new Signal<this, void>(this);
}
