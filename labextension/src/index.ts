/**
 * The JupyterLab plugins of jupyter-elastic-gpu: one model per page, the GPU queue sidebar
 * (restored across reloads, "Show GPU queue" in the command palette), and the notebook's job
 * view (a renderer for the job MIME type) that shows the same card as the sidebar.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { Token } from '@lumino/coreutils';

import { JobActions } from './actions';
import { ElasticGpuModel } from './model';
import { PANEL_ID, QueuePanel } from './panel';
import { JOB_MIME_TYPE, JobRenderer } from './renderer';

export { ElasticGpuApi, API_PATH } from './api';
export { ElasticGpuModel } from './model';
export { JOB_MIME_TYPE } from './renderer';
export { PANEL_ID } from './panel';

/** The command that opens the panel. */
export const SHOW_QUEUE_COMMAND = 'elastic-gpu:show-queue';

/** The page's one model and the card actions, shared by the sidebar and notebooks. */
export interface IElasticGpu {
  model: ElasticGpuModel;
  actions: JobActions;
}

export const IElasticGpu = new Token<IElasticGpu>(
  'jupyter-elastic-gpu:IElasticGpu',
  'The shared model of the GPU scheduler and what job cards can do.'
);

const core: JupyterFrontEndPlugin<IElasticGpu> = {
  id: 'jupyter-elastic-gpu:model',
  description: 'One model of the GPU scheduler per page.',
  autoStart: true,
  provides: IElasticGpu,
  optional: [IDocumentManager],
  activate: (app: JupyterFrontEnd, docManager: IDocumentManager | null): IElasticGpu => {
    const model = new ElasticGpuModel();
    return { model, actions: new JobActions(app, model, docManager) };
  }
};

const panel: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-elastic-gpu:panel',
  description: 'The GPU queue in the left sidebar.',
  autoStart: true,
  requires: [IElasticGpu],
  optional: [ILayoutRestorer, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    shared: IElasticGpu,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ): void => {
    const widget = new QueuePanel(shared.model, shared.actions);
    app.shell.add(widget, 'left', { rank: 600 });
    restorer?.add(widget, PANEL_ID);
    void restorer?.restore(shared.actions.logs, {
      command: 'elastic-gpu:open-log',
      args: w => ({ id: w.content.jobId }),
      name: w => w.content.jobId
    });
    app.commands.addCommand(SHOW_QUEUE_COMMAND, {
      label: 'Show GPU queue',
      caption: 'Show the GPUs and the job queue of the elastic GPU scheduler',
      execute: () => app.shell.activateById(widget.id)
    });
    app.commands.addCommand('elastic-gpu:open-log', {
      label: 'Open the log of a GPU job',
      execute: args => {
        const id = String(args.id ?? '');
        const job = shared.model.data.jobs.get(id) ?? { id, user: '', state: 'queued' };
        shared.actions.openLog(job);
      }
    });
    palette?.addItem({ command: SHOW_QUEUE_COMMAND, category: 'GPU' });
  }
};

const renderer: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-elastic-gpu:job-renderer',
  description: 'Shows a job output of a notebook as the sidebar job card.',
  autoStart: true,
  requires: [IElasticGpu, IRenderMimeRegistry],
  activate: (app: JupyterFrontEnd, shared: IElasticGpu, registry: IRenderMimeRegistry): void => {
    registry.addFactory(
      {
        safe: true,
        mimeTypes: [JOB_MIME_TYPE],
        defaultRank: 40,
        createRenderer: () => new JobRenderer(shared.model, shared.actions)
      },
      40
    );
  }
};

export default [core, panel, renderer];
