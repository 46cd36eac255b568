/**
 * How numbers and times read in the panel: one function per kind of value, so the sidebar
 * and the notebook's job card say the same thing the same way.
 */
import { gpuRange as rangeText } from './reasons';
import { IJob } from './types';

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** "45 s", "7 min", "1 h 12 min", "36 h", "7 days", "2 days 6 h". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.round(s / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  if (h >= 48) {
    const hours = Math.round(minutes / 60);
    const rest = hours % 24;
    return `${Math.floor(hours / 24)} days${rest ? ` ${rest} h` : ''}`;
  }
  return m ? `${h} h ${m} min` : `${h} h`;
}

/** A wall-clock time ("14:32"), with the date when it is not today. */
export function clock(epochSeconds: number, nowMs: number = Date.now()): string {
  const at = new Date(epochSeconds * 1000);
  const time = at.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (at.toDateString() === new Date(nowMs).toDateString()) {
    return time;
  }
  return `${at.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}`;
}

/** "in 6 min", "6 min ago", "now". */
export function relative(epochSeconds: number, nowMs: number = Date.now()): string {
  const delta = epochSeconds - nowMs / 1000;
  if (Math.abs(delta) < 30) {
    return 'now';
  }
  return delta > 0 ? `in ${duration(delta)}` : `${duration(-delta)} ago`;
}

/** Memory in MiB as people read it ("512 MiB", "15.8 GiB"). */
export function memory(mb: number): string {
  if (mb < 1024) {
    return `${Math.round(mb)} MiB`;
  }
  return `${(mb / 1024).toFixed(1)} GiB`;
}

export function percent(fraction: number): string {
  return `${Math.round(fraction * 100)} %`;
}

/** A weight or a ratio: at most two decimals ("1.5", "0.33"). */
export function figure(x: number): string {
  return String(Math.round(x * 100) / 100);
}

/**
 * The only way an epoch is shown (as the CLI, the notebook's text view and the widget show
 * it: `notebook/text.py`, `epoch_text`): "epoch N/M", 1-based as Keras' own log counts, N
 * never above M; "epoch N" while the total is unknown; null before anything is known.
 */
export function epochText(job: IJob): string | null {
  const p = job.progress;
  if (!p) {
    return null;
  }
  const epoch = p.epoch ?? null;
  const total = p.epochs ?? null;
  if (total) {
    const n = job.state === 'done' ? total : (epoch ?? 0) + 1;
    return `epoch ${Math.min(Math.max(n, 1), total)}/${total}`;
  }
  return epoch === null ? null : `epoch ${epoch + 1}`;
}

/** GPU ids as a short list ("0, 1, 2"), or "none". */
export function gpuList(ids: readonly string[] | undefined): string {
  return ids && ids.length ? ids.join(', ') : 'none';
}

/** A job's GPU range as every front end writes it ("1–4 GPUs", "2 GPUs"). */
export function gpuRange(job: IJob): string | null {
  if (job.min_gpus === undefined || job.max_gpus === undefined) {
    return null;
  }
  return rangeText(job.min_gpus, job.max_gpus);
}
