/**
 * A job's live log in the main area: follows `jobs/ID/logs` while the tab is visible, stops
 * once the job has ended and its last lines are in, and keeps the view at the end unless the
 * reader scrolled up.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';

import { ApiError } from './api';
import { h } from './dom';
import { OnScreenWidget } from './onscreen';
import { gpuIcon } from './icon';
import { ElasticGpuModel } from './model';
import { IJob, isFinal } from './types';

/** Lines of each log fetched per refresh. */
export const LOG_TAIL = 1000;

export class LogView extends OnScreenWidget {
  constructor(
    private readonly model: ElasticGpuModel,
    readonly jobId: string
  ) {
    super();
    this.addClass('jp-ElasticGpu-log');
    this.node.append(
      h('div', { class: 'jp-ElasticGpu-logStatus' }, this._status),
      this._trainer,
      h(
        'details',
        { class: 'jp-ElasticGpu-logSidecar' },
        h('summary', {}, 'Sidecar log'),
        this._sidecar
      )
    );
    this._poll = new Poll({
      factory: () => this._fetch(),
      frequency: { interval: 2000, backoff: true, max: 30000 },
      name: `jupyter-elastic-gpu:log:${jobId}`,
      standby: () => !this.isVisible || document.visibilityState === 'hidden',
      auto: false
    });
  }

  dispose(): void {
    this._acquired?.dispose();
    this._poll.dispose();
    super.dispose();
  }

  /** While visible: the job's state (to know when it ended) and its log. */
  protected onScreen(): void {
    this._acquired = this._acquired ?? this.model.acquire();
    void this._poll.start();
    void this._poll.refresh();
  }

  protected offScreen(): void {
    this._acquired?.dispose();
    this._acquired = null;
  }

  private async _fetch(): Promise<void> {
    const job = this.model.job(this.jobId);
    const ended = job !== undefined && isFinal(job.state);
    try {
      const logs = await this.model.api.logs(this.jobId, LOG_TAIL);
      this._show(this._trainer, logs.trainer || '(the trainer has written nothing yet)');
      this._show(this._sidecar, logs.sidecar || '(empty)');
      this._status.textContent = ended
        ? `The job is ${job?.state}: this is the end of its log.`
        : `Following the log (last ${LOG_TAIL} lines).`;
      if (ended) {
        void this._poll.stop();
      }
    } catch (error) {
      const message = error instanceof ApiError ? error.message : String(error);
      this._status.textContent = `The log cannot be read: ${message}`;
      throw error;
    }
  }

  private _show(pre: HTMLElement, text: string): void {
    if (pre.textContent === text) {
      return;
    }
    const atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    pre.textContent = text;
    if (atEnd) {
      pre.scrollTop = pre.scrollHeight;
    }
  }

  private _poll: Poll;
  private _acquired: IDisposable | null = null;
  private _status = h('span');
  private _trainer = h('pre', { class: 'jp-ElasticGpu-logText' });
  private _sidecar = h('pre', { class: 'jp-ElasticGpu-logText' });
}

/** A main-area tab holding a job's log. */
export function createLogWidget(model: ElasticGpuModel, job: IJob): MainAreaWidget<LogView> {
  const content = new LogView(model, job.id);
  const widget = new MainAreaWidget({ content });
  widget.id = `elastic-gpu-log-${job.id}`;
  widget.title.label = `Log: ${job.name ?? job.id}`;
  widget.title.caption = `Live log of job ${job.id}`;
  widget.title.icon = gpuIcon;
  widget.title.closable = true;
  return widget;
}
