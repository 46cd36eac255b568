/**
 * The notebook's job view: outputs of MIME type `application/vnd.jupyter-elastic-gpu.job+json`
 * (data `{"job_id": "j-..."}`, docs/notebook.md) render the sidebar's job card in full, fed
 * by the page's shared model (the push channel), not by the kernel.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { IDisposable } from '@lumino/disposable';
import { Message } from '@lumino/messaging';

import { h } from './dom';
import { OnScreenWidget } from './onscreen';
import { JobCard } from './jobcard';
import { ElasticGpuModel } from './model';
import { IJobActionHandler } from './panel';

export const JOB_MIME_TYPE = 'application/vnd.jupyter-elastic-gpu.job+json';

/** A job id as the API spells one. */
const JOB_ID = /^[A-Za-z0-9_-]{1,64}$/;

export class JobRenderer extends OnScreenWidget implements IRenderMime.IRenderer {
  constructor(
    private readonly model: ElasticGpuModel,
    private readonly actions: IJobActionHandler
  ) {
    super();
    this.addClass('jp-ElasticGpu-output');
    this._card = new JobCard({
      detail: 'full',
      onAction: (action, job) =>
        void this.actions.run(action, job).catch(() => this._card.settle(action))
    });
    model.changed.connect(this._render, this);
  }

  async renderModel(mimeModel: IRenderMime.IMimeModel): Promise<void> {
    const data = mimeModel.data[JOB_MIME_TYPE] as { job_id?: unknown } | undefined;
    const id = typeof data?.job_id === 'string' && JOB_ID.test(data.job_id) ? data.job_id : null;
    if (id !== this._jobId) {
      this._watch?.dispose();
      this._jobId = id;
      this._watch = id && this._acquired ? this.model.watchProgress(id) : null;
    }
    this._render();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.offScreen();
    this.model.changed.disconnect(this._render, this);
    this._card.dispose();
    super.dispose();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._render();
  }

  /** While the card is on screen (its notebook's tab shown), the page's model stays live. */
  protected onScreen(): void {
    this._acquired = this._acquired ?? this.model.acquire();
    if (this._jobId && !this._watch) {
      this._watch = this.model.watchProgress(this._jobId);
    }
    this._render();
  }

  protected offScreen(): void {
    this._watch?.dispose();
    this._watch = null;
    this._acquired?.dispose();
    this._acquired = null;
  }

  private _render(): void {
    if (this._jobId === null) {
      this._show(h('div', { class: 'jp-ElasticGpu-empty' }, 'This output names no job.'));
      return;
    }
    const job = this.model.job(this._jobId);
    if (!job) {
      const problem = this.model.problem;
      this._show(
        h(
          'div',
          { class: 'jp-ElasticGpu-empty' },
          problem ? problem.message : `Loading job ${this._jobId}\u2026`
        )
      );
      return;
    }
    this._card.update(job, {
      me: this.model.whoami,
      canOpenNotebook: false,
      progress: this.model.progress(this._jobId),
      now: Date.now()
    });
    this._show(this._card.node);
  }

  private _show(node: HTMLElement): void {
    if (this.node.firstChild !== node || this.node.childNodes.length !== 1) {
      this.node.replaceChildren(node);
    }
  }

  private _card: JobCard;
  private _jobId: string | null = null;
  private _acquired: IDisposable | null = null;
  private _watch: IDisposable | null = null;
}
