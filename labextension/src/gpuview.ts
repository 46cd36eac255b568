/**
 * One GPU in the sidebar: node, model, memory, utilisation with its recent history, and who
 * holds it (free, a job, or a process the scheduler did not start).
 */
import { sparkline } from './chart';
import { h } from './dom';
import { memory, percent } from './format';
import { IUtilSample } from './model';
import { IGpu, IMigSlice, IWhoami } from './types';

/** `data-gpu-state` values (docs/sidebar.md). */
export type GpuState = 'free' | 'held' | 'busy';

export function gpuState(gpu: IGpu): GpuState {
  if (gpu.holder) {
    return 'held';
  }
  if ((gpu.external_processes ?? []).length || gpu.healthy === false) {
    return 'busy';
  }
  return 'free';
}

export function holderText(gpu: IGpu, me: IWhoami | null): string {
  if (gpu.holder) {
    const owner = gpu.holder_user ?? 'another user';
    const mine = me !== null && gpu.holder_user === me.user;
    if (gpu.holder_name) {
      return `${gpu.holder_name} (${mine ? 'you' : owner})`;
    }
    return mine ? `your job ${gpu.holder}` : `a job of ${owner}`;
  }
  const others = gpu.external_processes ?? [];
  if (others.length) {
    const owners = [...new Set(others.map(p => p.user ?? 'an unknown user'))];
    const what = others.length === 1 ? 'a process' : `${others.length} processes`;
    return `busy: ${what} of ${owners.join(', ')} outside the scheduler`;
  }
  if (gpu.healthy === false) {
    return 'busy outside the scheduler';
  }
  return 'free';
}

/**
 * A GPU in MIG mode, as its tile says it: "MIG: 3g.40gb, 2 x 1g.10gb" (its instances by
 * profile, in their order); null for a GPU without MIG. No job runs on it whole.
 */
export function migText(gpu: IGpu): string | null {
  if (!gpu.mig) {
    return null;
  }
  if (!gpu.mig.length) {
    return 'MIG: no instances';
  }
  const counts = new Map<string, number>();
  for (const s of gpu.mig) {
    counts.set(s.profile, (counts.get(s.profile) ?? 0) + 1);
  }
  const parts = [...counts].map(([profile, n]) => (n > 1 ? `${n} \u00d7 ${profile}` : profile));
  return `MIG: ${parts.join(', ')}`;
}

/** Who holds a MIG slice, as its row says it: "free", "kernel-1a2b (you)", "held by bob". */
export function sliceHolderText(slice: IMigSlice, me: IWhoami | null): string {
  if (!slice.holder) {
    return 'free';
  }
  const mine = me !== null && slice.holder_user === me.user;
  if (slice.holder_name) {
    return `${slice.holder_name} (${mine ? 'you' : (slice.holder_user ?? 'another user')})`;
  }
  return mine ? `yours (${slice.holder})` : `held by ${slice.holder_user ?? 'another user'}`;
}

/** Whether NVML reports the utilisation of any of the GPU's MIG slices. */
export function slicesReport(gpu: IGpu): boolean {
  return (gpu.mig ?? []).some(slice => typeof slice.utilization === 'number');
}

/** Each MIG slice of a GPU under its tile: its profile, who holds it and, where NVML reports
 * it, how busy it is. */
function sliceList(gpu: IGpu, me: IWhoami | null): HTMLElement | string {
  if (!gpu.mig?.length) {
    return '';
  }
  return h(
    'ul',
    { class: 'jp-ElasticGpu-gpuSlices' },
    ...gpu.mig.map(slice =>
      h(
        'li',
        {
          class: 'jp-ElasticGpu-gpuSlice',
          title: slice.uuid,
          'data-slice-uuid': slice.uuid,
          'data-slice-profile': slice.profile,
          'data-slice-state': slice.holder ? 'held' : 'free'
        },
        h('span', { class: 'jp-ElasticGpu-sliceProfile' }, slice.profile),
        h('span', { class: 'jp-ElasticGpu-sliceHolder' }, sliceHolderText(slice, me)),
        typeof slice.utilization === 'number'
          ? h(
              'span',
              { class: 'jp-ElasticGpu-sliceUtil', title: 'utilisation (NVML GPM)' },
              percent(slice.utilization)
            )
          : ''
      )
    )
  );
}

/** What the tile calls a GPU: its kind (`A100-SXM4-80GB`), or its name for a simulated GPU
 * described by a count alone (`Simulated GPU`). */
export function modelText(gpu: IGpu): string {
  return gpu.kind && gpu.kind !== 'simulated' ? gpu.kind : (gpu.name ?? '');
}

function migLine(gpu: IGpu): HTMLElement | string {
  const text = migText(gpu);
  if (!text) {
    return '';
  }
  const title =
    'MIG mode is on: CUDA sees these instances, not one GPU, so no job runs on this GPU whole ' +
    '(the scheduler never changes a MIG layout)';
  return h('div', { class: 'jp-ElasticGpu-gpuMig', title }, text);
}

export class GpuTile {
  readonly node: HTMLElement = h('div', { class: 'jp-ElasticGpu-gpu' });

  update(
    gpu: IGpu,
    samples: readonly IUtilSample[],
    windowMs: number,
    now: number,
    me: IWhoami | null
  ): void {
    const last = samples[samples.length - 1];
    if (gpu === this._gpu && last === this._last && me === this._me) {
      return;
    }
    this._gpu = gpu;
    this._last = last;
    this._me = me;
    const state = gpuState(gpu);
    this.node.dataset.gpuIndex = String(gpu.index);
    this.node.dataset.gpuState = state;
    this.node.dataset.gpuId = gpu.id;
    this.node.dataset.gpuKind = gpu.kind ?? '';
    if (gpu.mig) {
      this.node.dataset.gpuMig = String(gpu.mig.length);
    } else {
      delete this.node.dataset.gpuMig;
    }
    const used = gpu.memory_used_mb;
    const total = gpu.memory_total_mb;
    const util = gpu.utilization;
    const stats: HTMLElement[] = [];
    if (typeof util === 'number') {
      stats.push(
        h('span', { class: 'jp-ElasticGpu-gpuUtil', title: 'utilisation' }, percent(util))
      );
      if (samples.length) {
        const minutes = Math.round(windowMs / 60000);
        stats.push(
          sparkline(
            samples,
            windowMs,
            now,
            `GPU ${gpu.index} utilisation, last ${minutes} min`
          ) as any
        );
      }
    }
    if (typeof util !== 'number' && gpu.mig && !slicesReport(gpu)) {
      // NVML reports no utilisation for a GPU in MIG mode; for its instances only where the
      // GPU has performance monitoring (Hopper and later): then each slice's row shows it
      stats.push(
        h(
          'span',
          {
            class: 'jp-ElasticGpu-gpuUtil',
            title:
              'NVML reports no utilisation for a GPU in MIG mode, nor for its instances without GPU performance monitoring (before Hopper)'
          },
          'utilisation not reported (MIG)'
        )
      );
    }
    if (typeof used === 'number' && typeof total === 'number' && total > 0) {
      stats.push(
        h(
          'span',
          { class: 'jp-ElasticGpu-gpuMemory', title: 'memory used / total' },
          `${memory(used)} / ${memory(total)}`
        )
      );
    }
    this.node.title = [`GPU ${gpu.index}`, gpu.name, gpu.node, gpu.uuid]
      .filter(Boolean)
      .join(' \u00b7 ');
    this.node.replaceChildren(
      h(
        'div',
        { class: 'jp-ElasticGpu-gpuHead' },
        h('span', { class: 'jp-ElasticGpu-gpuIndex' }, `GPU ${gpu.index}`),
        h('span', { class: 'jp-ElasticGpu-gpuHolder', 'data-holder': state }, holderText(gpu, me)),
        h('span', { class: 'jp-ElasticGpu-gpuNode' }, gpu.node ?? '')
      ),
      h(
        'div',
        { class: 'jp-ElasticGpu-gpuStats' },
        // its kind, the word people tell their GPUs apart by (the full name is in the title)
        h('span', { class: 'jp-ElasticGpu-gpuModel' }, modelText(gpu)),
        ...stats
      ),
      migLine(gpu),
      sliceList(gpu, me)
    );
  }

  dispose(): void {
    this.node.remove();
  }

  private _gpu: IGpu | null = null;
  private _last: IUtilSample | undefined = undefined;
  private _me: IWhoami | null = null;
}
