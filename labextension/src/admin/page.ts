/**
 * The admin page at work: it draws the GPUs, the jobs and usage against share from the API,
 * follows the scheduler's state (a long poll of `updates`), and runs the admin actions, each
 * confirmed first where it cannot be undone in a click, its outcome said above the tables.
 */
import { ApiError } from '../apierror';
import { IGpu, IJob } from '../types';
import { AdminClient } from './client';
import {
  fill,
  groupRow,
  gpuRow,
  IAdminSteering,
  jobRow,
  sharesNote,
  sortJobs,
  userRow
} from './render';

/** What the server puts in the page (`data-config` of its body: `admin_page.py`). */
export interface IAdminConfig {
  api: string;
  user: string;
  mode: string;
  xsrf: string;
}

/** Seconds a long poll of `updates` waits: at the latest then, utilisation is drawn again. */
export const POLL_S = 10;
/** How long the page waits before it asks again after a failed poll. */
export const RETRY_MS = 3000;

/** What the page needs of the browser, given by the tests too. */
export interface IPageHost {
  confirm(text: string): boolean;
  wait(ms: number): Promise<void>;
}

export class AdminPage implements IAdminSteering {
  constructor(
    private readonly doc: Document,
    private readonly client: AdminClient,
    private readonly host: IPageHost
  ) {}

  /** The page's elements by id (admin.html). */
  private el<T extends HTMLElement = HTMLElement>(id: string): T {
    return this.doc.getElementById(id) as T;
  }

  say(text: string, ok = false): void {
    const box = this.el('message');
    box.textContent = text;
    box.className = 'jp-ElasticAdmin-message' + (ok ? ' ok' : '');
    box.hidden = !text;
  }

  // -- steering (IAdminSteering) ------------------------------------------------------------
  drain(gpu: IGpu, drained: boolean): Promise<void> {
    if (!drained) {
      return this.act(`GPU ${gpu.id} is back in service`, () => this.client.drain(gpu.id, false));
    }
    const moves = gpu.holder ? ` Job ${gpu.holder} (${gpu.holder_user}) moves to other GPUs.` : '';
    return this.act(
      `GPU ${gpu.id} drained`,
      () => this.client.drain(gpu.id, true),
      `Drain GPU ${gpu.id} for maintenance? No job will get it.${moves}`
    );
  }

  suspend(job: IJob): Promise<void> {
    const who = whoOf(job);
    return this.act(
      `Suspended ${who}`,
      () => this.client.steer(job.id, 'suspend'),
      `Suspend ${who}? It checkpoints, stops and gets no GPUs until resumed.`
    );
  }

  resume(job: IJob): Promise<void> {
    return this.act(`Resumed ${whoOf(job)}`, () => this.client.steer(job.id, 'resume'));
  }

  cancel(job: IJob): Promise<void> {
    const who = whoOf(job);
    return this.act(
      `Cancelled ${who}`,
      () => this.client.steer(job.id, 'cancel'),
      `Cancel ${who}? It stops for good.`
    );
  }

  setPriority(job: IJob, priority: number): Promise<void> {
    return this.act(`Priority of job ${job.id} set to ${priority}`, () =>
      this.client.setPriority(job.id, priority)
    );
  }

  setWeight(group: string, weight: number): Promise<void> {
    return this.act(`Weight of group ${group} set to ${weight}`, () =>
      this.client.setWeight(group, weight)
    );
  }

  /** Run one action (after `confirmText`'s yes, where given), say how it went, redraw. */
  async act(what: string, call: () => Promise<unknown>, confirmText?: string): Promise<void> {
    if (confirmText && !this.host.confirm(confirmText)) {
      return;
    }
    this.say('');
    try {
      await call();
      this.say(what, true);
    } catch (e) {
      this.say(`${what} failed: ${(e as Error).message}`);
    }
    try {
      await this.refresh();
    } catch (e) {
      this.say(`The page cannot be drawn again: ${(e as Error).message}`);
    }
  }

  // -- drawing ------------------------------------------------------------------------------
  /** Draw everything again: one refresh at a time, a call during one waits and draws again. */
  async refresh(): Promise<void> {
    while (this.refreshing) {
      try {
        await this.refreshing;
      } catch {
        // the caller of that refresh says why it failed
      }
    }
    this.refreshing = this.draw();
    try {
      await this.refreshing;
    } finally {
      this.refreshing = null;
    }
  }

  private async draw(): Promise<void> {
    const [inventory, jobs] = await Promise.all([this.client.gpus(), this.client.jobs()]);
    fill(
      this.el('gpus'),
      inventory.gpus.map(gpu => gpuRow(gpu, this)),
      7,
      'no GPUs'
    );
    fill(
      this.el('jobs'),
      sortJobs(jobs).map(job => jobRow(job, this)),
      8,
      'no jobs'
    );
    await this.drawShares();
  }

  private async drawShares(): Promise<void> {
    const box = this.el('shares');
    const note = this.el('shares-note');
    try {
      const doc = await this.client.shares();
      box.hidden = false;
      note.textContent = sharesNote(doc);
      fill(this.el('share-users'), doc.users.map(userRow), 8, 'no usage yet');
      fill(
        this.el('share-groups'),
        doc.groups.map(g => groupRow(g, this)),
        5,
        'no groups (weights come from JupyterHub groups)'
      );
    } catch (e) {
      box.hidden = true;
      note.textContent =
        e instanceof ApiError && e.status === 404
          ? 'Fair share is not available on this scheduler.'
          : `Usage against share cannot be shown: ${(e as Error).message}`;
    }
  }

  /** Follow the scheduler's state for as long as the page is open (`stopped` ends it). */
  async follow(): Promise<void> {
    let version = -1;
    while (!this.stopped) {
      try {
        version = (await this.client.updates(version, POLL_S)).version;
        await this.refresh();
        this.el('live').textContent = `live (state ${version})`;
      } catch (e) {
        this.el('live').textContent = `reconnecting: ${(e as Error).message}`;
        await this.host.wait(RETRY_MS);
      }
    }
  }

  /** The page was left (or a test is over): the next turn of `follow` ends it. */
  stopped = false;

  private refreshing: Promise<void> | null = null;
}

function whoOf(job: IJob): string {
  return `job ${job.id} (${job.name}) of ${job.user}`;
}
