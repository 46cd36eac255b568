/**
 * What a job card's buttons do, in one place for the sidebar and the notebook view: cancel
 * (saying why when the server refuses), the live log in the main area (one tab per job), and
 * the notebook that submitted the job.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, Notification, WidgetTracker } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';

import { JobAction } from './jobcard';
import { createLogWidget, LogView } from './logs';
import { ElasticGpuModel } from './model';
import { IJobActionHandler } from './panel';
import { IJob } from './types';

export class JobActions implements IJobActionHandler {
  constructor(
    private readonly app: JupyterFrontEnd,
    private readonly model: ElasticGpuModel,
    private readonly docManager: IDocumentManager | null
  ) {}

  readonly logs = new WidgetTracker<MainAreaWidget<LogView>>({
    namespace: 'elastic-gpu-logs'
  });

  get canOpenNotebook(): boolean {
    return this.docManager !== null;
  }

  async run(action: JobAction, job: IJob): Promise<void> {
    try {
      switch (action) {
        case 'cancel':
        case 'suspend':
        case 'resume':
          await this.model.change(job.id, action);
          return;
        case 'logs':
          this.openLog(job);
          return;
        case 'open-notebook':
          await this.openNotebook(job);
          return;
      }
    } catch (error) {
      Notification.error(`${labels[action]} ${job.name ?? job.id}: ${(error as Error).message}`, {
        autoClose: 8000
      });
      throw error;
    }
  }

  openLog(job: IJob): void {
    let widget = this.logs.find(w => w.content.jobId === job.id);
    if (!widget || widget.isDisposed) {
      widget = createLogWidget(this.model, job);
      void this.logs.add(widget);
      this.app.shell.add(widget, 'main');
    }
    this.app.shell.activateById(widget.id);
  }

  async openNotebook(job: IJob): Promise<void> {
    if (!this.docManager || !job.notebook) {
      throw new Error('no notebook is known for this job');
    }
    try {
      await this.docManager.services.contents.get(job.notebook, { content: false });
    } catch {
      throw new Error(`${job.notebook} no longer exists (moved or deleted?)`);
    }
    const widget = this.docManager.openOrReveal(job.notebook);
    if (!widget) {
      throw new Error(`${job.notebook} cannot be opened`);
    }
  }
}

const labels: Record<JobAction, string> = {
  cancel: 'Could not cancel',
  suspend: 'Could not suspend',
  resume: 'Could not resume',
  logs: 'Could not open the log of',
  'open-notebook': 'Could not open the notebook of'
};
