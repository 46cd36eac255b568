/**
 * Two small SVG charts, no chart library: a GPU's recent utilisation (a sparkline over a
 * fixed time window) and a job's loss curve with axes, where every resize is marked at the
 * step it happened. Colours come from the theme through CSS classes (style/base.css).
 */
import { IProgressRecord } from './types';

const SVG = 'http://www.w3.org/2000/svg';

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number> = {},
  text?: string
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    el.setAttribute(k, String(v));
  }
  if (text !== undefined) {
    el.textContent = text;
  }
  return el;
}

/** Utilisation samples (0..1) over the last `windowMs`, right-aligned at `now`. */
export function sparkline(
  samples: readonly { t: number; u: number }[],
  windowMs: number,
  now: number,
  label: string
): SVGSVGElement {
  const width = 100;
  const height = 24;
  const root = svg('svg', {
    class: 'jp-ElasticGpu-sparkline',
    viewBox: `0 0 ${width} ${height}`,
    preserveAspectRatio: 'none',
    role: 'img'
  });
  root.appendChild(svg('title', {}, label));
  const points = samples
    .filter(s => s.t >= now - windowMs)
    .map(s => {
      const x = width - ((now - s.t) / windowMs) * width;
      const y = height - Math.max(0, Math.min(1, s.u)) * (height - 2) - 1;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
  if (points.length) {
    // The newest sample is the value now: hold it to the right edge.
    points.push(`${width},${points[points.length - 1].split(',')[1]}`);
  }
  if (points.length) {
    const area = `0,${height} ${points.join(' ')} ${width},${height}`;
    root.appendChild(svg('polygon', { class: 'jp-ElasticGpu-sparkline-area', points: area }));
    root.appendChild(
      svg('polyline', { class: 'jp-ElasticGpu-sparkline-line', points: points.join(' ') })
    );
  }
  return root;
}

/** The fewest ticks an axis labels when its range allows: one or two say nothing about scale. */
const MIN_TICKS = 3;

/** Round tick values covering [lo, hi], about `count` of them and at least MIN_TICKS. */
export function ticks(lo: number, hi: number, count = 4): number[] {
  if (!(hi > lo)) {
    return [lo];
  }
  // Nice steps are 1, 2 or 5 x 10^k: start at the smallest one not below (hi - lo) / count and
  // take the next smaller one while it labels too few values (0.5 labels only 0.5 in 0.03..0.9).
  const raw = (hi - lo) / count;
  let mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const nice = [1, 2, 5];
  let i = nice.findIndex(m => m * mag >= raw * (1 - 1e-9));
  if (i < 0) {
    i = 0;
    mag *= 10;
  }
  // Two steps down divide the step by at least 4, enough for MIN_TICKS over 4 x raw.
  let out: number[] = [];
  for (let tries = 0; tries < 3; tries++) {
    const step = nice[i] * mag;
    out = [];
    // The length bound stops a step below the float resolution of v from looping forever.
    const first = Math.ceil(lo / step - 1e-9) * step;
    for (let v = first; v <= hi + step * 1e-9 && out.length <= 10 * count; v += step) {
      out.push(Number(v.toPrecision(12)));
    }
    if (out.length >= MIN_TICKS) {
      break;
    }
    i -= 1;
    if (i < 0) {
      i = nice.length - 1;
      mag /= 10;
    }
  }
  return out;
}

/** A resize as the chart marks it: the first step on the new GPU count. */
export interface IResizeMark {
  step: number;
  from: number;
  to: number;
}

/** Where the replica count changed between consecutive progress records. */
export function resizeMarks(records: readonly IProgressRecord[]): IResizeMark[] {
  const marks: IResizeMark[] = [];
  let last: number | null = null;
  for (const r of records) {
    if (typeof r.replicas !== 'number' || typeof r.global_step !== 'number') {
      continue;
    }
    if (last !== null && r.replicas !== last) {
      marks.push({ step: r.global_step, from: last, to: r.replicas });
    }
    last = r.replicas;
  }
  return marks;
}

/** A generous width of one character of a chart label (9 px, style/base.css), in viewBox units. */
const LABEL_CHAR_WIDTH = 7;

/** Large tick values read as people write them (10k, 1.5M), tiny ones in exponent form. */
const COMPACT = new Intl.NumberFormat('en', { notation: 'compact', maximumSignificantDigits: 3 });

function short(v: number): string {
  if (v !== 0 && Math.abs(v) < 1e-2) {
    return v.toExponential(0);
  }
  return Math.abs(v) >= 1e4 ? COMPACT.format(v) : String(Number(v.toPrecision(3)));
}

/** The share of the steps, from the first, whose loss may lie above the chart. */
export const EARLY_SHARE = 0.1;
/** Clip only when the whole range is at least this many times the later part's range. */
const CLIP_RATIO = 2;

/** A loss axis' range, and the highest loss above it (null: nothing is clipped). */
export interface ILossRange {
  lo: number;
  hi: number;
  above: number | null;
}

/**
 * The loss axis' range: robust to the first steps. A fresh model's first losses can be many
 * times the rest, and a range that holds them flattens the curve that matters into a line
 * along the bottom. So the range is that of the later part (the points past the first
 * `EARLY_SHARE` of the steps), shown whole, spikes included; only points of the early part
 * may lie above it, and only when holding them would need `CLIP_RATIO` times the height.
 * The chart draws those at its top edge and says the highest (`above`).
 */
export function lossRange(pts: readonly { global_step: number; loss: number }[]): ILossRange {
  const losses = pts.map(p => p.loss);
  const lo = Math.min(...losses);
  const hi = Math.max(...losses);
  const x0 = pts[0].global_step;
  const cut = x0 + EARLY_SHARE * (pts[pts.length - 1].global_step - x0);
  const later = pts.filter(p => p.global_step > cut).map(p => p.loss);
  if (later.length >= 2) {
    const laterHi = Math.max(...later);
    if (laterHi > lo && hi - lo >= CLIP_RATIO * (laterHi - lo)) {
      return { lo, hi: laterHi, above: hi };
    }
  }
  return { lo, hi, above: null };
}

/** The loss over global steps with axes and labelled resize marks; null without data. */
export function lossChart(records: readonly IProgressRecord[]): SVGSVGElement | null {
  const pts = records.filter(
    r => typeof r.global_step === 'number' && typeof r.loss === 'number' && Number.isFinite(r.loss)
  ) as { global_step: number; loss: number }[];
  if (pts.length < 2) {
    return null;
  }
  const W = 320;
  const H = 150;
  const m = { left: 44, right: 8, top: 14, bottom: 30 };
  const x0 = pts[0].global_step;
  const x1 = Math.max(pts[pts.length - 1].global_step, x0 + 1);
  const range = lossRange(pts);
  let y0 = range.lo;
  let y1 = range.hi;
  if (y1 - y0 < 1e-12) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  const sx = (v: number): number => m.left + ((v - x0) / (x1 - x0)) * (W - m.left - m.right);
  // A loss above the range (the first steps': lossRange) is drawn at the top edge.
  const sy = (v: number): number =>
    H - m.bottom - ((Math.min(v, y1) - y0) / (y1 - y0)) * (H - m.top - m.bottom);

  const root = svg('svg', {
    class: 'jp-ElasticGpu-lossChart',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img'
  });
  root.appendChild(svg('title', {}, 'Loss per training step; dashed lines mark resizes'));
  const axes = svg('g', { class: 'jp-ElasticGpu-axis' });
  axes.appendChild(
    svg('path', {
      d: `M${m.left},${m.top} V${H - m.bottom} H${W - m.right}`,
      fill: 'none'
    })
  );
  for (const v of ticks(x0, x1)) {
    const x = sx(v);
    axes.appendChild(svg('path', { d: `M${x},${H - m.bottom} v4`, fill: 'none' }));
    axes.appendChild(svg('text', { x, y: H - m.bottom + 14, 'text-anchor': 'middle' }, short(v)));
  }
  for (const v of ticks(y0, y1)) {
    const y = sy(v);
    axes.appendChild(svg('path', { d: `M${m.left - 4},${y} h4`, fill: 'none' }));
    axes.appendChild(svg('text', { x: m.left - 6, y: y + 3, 'text-anchor': 'end' }, short(v)));
  }
  axes.appendChild(
    svg('text', { x: (m.left + W - m.right) / 2, y: H - 2, 'text-anchor': 'middle' }, 'step')
  );
  axes.appendChild(
    svg(
      'text',
      {
        x: 10,
        y: (m.top + H - m.bottom) / 2,
        'text-anchor': 'middle',
        transform: `rotate(-90 10 ${(m.top + H - m.bottom) / 2})`
      },
      'loss'
    )
  );
  if (range.above !== null) {
    axes.appendChild(
      svg(
        'text',
        { class: 'jp-ElasticGpu-lossAbove', x: m.left + 4, y: m.top + 9 },
        `\u2191 first steps up to ${short(range.above)}`
      )
    );
  }
  root.appendChild(axes);

  for (const mark of resizeMarks(records)) {
    if (mark.step < x0 || mark.step > x1) {
      continue;
    }
    const x = sx(mark.step);
    const g = svg('g', { class: 'jp-ElasticGpu-resizeMark' });
    g.appendChild(
      svg('title', {}, `resized from ${mark.from} to ${mark.to} GPUs at step ${mark.step}`)
    );
    g.appendChild(svg('path', { d: `M${x},${m.top} V${H - m.bottom}`, fill: 'none' }));
    // Without layout the label's width is an estimate; one that would pass the right edge
    // ends at its line instead of starting there.
    const label = `${mark.from}\u2192${mark.to}`;
    const fits = x + 2 + label.length * LABEL_CHAR_WIDTH <= W;
    g.appendChild(
      svg(
        'text',
        fits ? { x: x + 2, y: m.top - 3 } : { x: x - 2, y: m.top - 3, 'text-anchor': 'end' },
        label
      )
    );
    root.appendChild(g);
  }
  const line = pts.map(p => `${sx(p.global_step).toFixed(1)},${sy(p.loss).toFixed(1)}`).join(' ');
  root.appendChild(
    svg('polyline', { class: 'jp-ElasticGpu-lossLine', points: line, fill: 'none' })
  );
  return root;
}
