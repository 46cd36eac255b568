/**
 * The JupyterLab plugins of jupyter-elastic-gpu: one model per page, the GPU queue sidebar
 * (restored across reloads, "Show GPU queue" in the command palette), the notebook's job
 * view (a renderer for the job MIME type) that shows the same card as the sidebar,
 * notifications of the caller's jobs, and the GPU counts in the status bar.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Token } from '@lumino/coreutils';

import { JobActions } from './actions';
import { ElasticGpuModel } from './model';
import { JobNotifier, NoticeAction } from './notify';
import { PANEL_ID, QueuePanel } from './panel';
import { JOB_MIME_TYPE, JobRenderer } from './renderer';
import { GpuStatusItem, STATUS_ITEM_ID } from './statusbar';

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

/** Open the sidebar (through its command when the panel plugin is there). */
function showQueue(app: JupyterFrontEnd): void {
  if (app.commands.hasCommand(SHOW_QUEUE_COMMAND)) {
    void app.commands.execute(SHOW_QUEUE_COMMAND);
  }
}

const NOTIFICATIONS_PLUGIN = 'jupyter-elastic-gpu:notifications';

const notifications: JupyterFrontEndPlugin<void> = {
  id: NOTIFICATIONS_PLUGIN,
  description: "Notifies the user of their own jobs' starts, resizes, ends and failures.",
  autoStart: true,
  requires: [IElasticGpu],
  optional: [ISettingRegistry],
  activate: (app: JupyterFrontEnd, shared: IElasticGpu, registry: ISettingRegistry | null) => {
    const labels: Record<NoticeAction, string> = {
      'open-notebook': 'Open notebook',
      logs: 'Show log',
      'show-queue': 'Show GPU queue'
    };
    const notifier = new JobNotifier({
      model: shared.model,
      canOpenNotebook: shared.actions.canOpenNotebook,
      scope: shared.model.api.settings.baseUrl,
      emit: notice =>
        Notification.emit(notice.message, notice.type, {
          autoClose: notice.autoClose,
          data: notice.job ? { jobId: notice.job.id } : {},
          actions: notice.actions.map((action, i) => ({
            label: labels[action],
            displayType: i === 0 ? 'accent' : 'default',
            callback: () => {
              if (action === 'show-queue') {
                showQueue(app);
              } else if (notice.job) {
                void shared.actions.run(action, notice.job).catch(() => undefined);
              }
            }
          }))
        })
    });
    if (!registry) {
      notifier.enabled = true;
      return;
    }
    void registry
      .load(NOTIFICATIONS_PLUGIN)
      .then(settings => {
        const apply = () => {
          notifier.enabled = settings.composite.enabled !== false;
        };
        settings.changed.connect(apply);
        apply();
      })
      .catch(() => {
        notifier.enabled = true; // no schema (a development build): the default
      });
  }
};

const statusBarItem: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-elastic-gpu:status-bar',
  description: 'GPUs in use and jobs queued in the status bar; a click shows the GPU queue.',
  autoStart: true,
  requires: [IElasticGpu],
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, shared: IElasticGpu, statusBar: IStatusBar | null) => {
    if (!statusBar) {
      return;
    }
    const item = new GpuStatusItem(shared.model, () => showQueue(app));
    statusBar.registerStatusItem(STATUS_ITEM_ID, {
      item,
      align: 'left',
      rank: 4,
      isActive: () => item.relevant,
      activeStateChanged: item.relevantChanged
    });
  }
};

export default [core, panel, renderer, notifications, statusBarItem];
