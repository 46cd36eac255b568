"""The figure of a comparison (``simulate --plot``): what a reader should see at a glance.

Our policy (``adaptive`` with the sidecar) is drawn strong and every other run muted, so the
eye finds it first. Three questions, one panel each: how long do jobs take (JCT distribution),
how close to the limit is each run (mean JCT and makespan over their lower bounds), and how
full were the GPUs over time (one heat strip per run, not overlapping step lines).
"""

from __future__ import annotations

import itertools
import math

from .compare import Comparison, parse_run

#: The run the figure sets apart: the adaptive policy carried out by the sidecar.
OURS = ("adaptive", "sidecar")
OURS_COLOUR = "#c0392b"
#: Muted colours for the other runs, in order (colour-blind-safe Tableau hues, desaturated).
OTHER_COLOURS = ("#4e79a7", "#59a14f", "#b07aa1", "#f28e2b", "#76b7b2", "#9c755f", "#edc948")
OTHER_STYLES = ("-", "--", "-.", ":")
#: Columns of the occupancy strips (time bins over the longest run).
STRIP_BINS = 600


def is_ours(name: str) -> bool:
    try:
        return parse_run(name) == OURS
    except ValueError:
        return False


def _styles(names: list[str]) -> dict[str, dict]:
    """Line and marker style per run: ours thick and red, the rest thin, muted, dashed."""
    out, k = {}, 0
    for name in names:
        if is_ours(name):
            out[name] = {"color": OURS_COLOUR, "lw": 2.8, "ls": "-", "alpha": 1.0, "z": 5}
        else:
            colour = OTHER_COLOURS[k % len(OTHER_COLOURS)]
            ls = OTHER_STYLES[k % len(OTHER_STYLES)]
            out[name] = {"color": colour, "lw": 1.3, "ls": ls, "alpha": 0.75, "z": 2}
            k += 1
    return out


def title(comp: Comparison) -> str:
    cfg = comp.config
    if cfg.kinds:
        layout = cfg.layout()
    else:
        layout = f"{cfg.nodes} nodes x {cfg.gpus_per_node}" if cfg.nodes > 1 else "one node"
    return f"{comp.workload}: {comp.jobs} jobs on {cfg.total_gpus} GPUs ({layout})"


def subtitle(comp: Comparison) -> str:
    cfg, costs = comp.config, comp.costs
    parts = [
        f"sidecar resize {costs.sidecar_s:g} s",
        f"termination restart {costs.termination_s:g} s + work since the last checkpoint "
        f"(every {costs.checkpoint_interval:g} s)",
        f"job start {cfg.start_cost_s:g} s",
    ]
    if cfg.user_gpu_cap:
        parts.append(f"at most {cfg.user_gpu_cap} GPUs per user")
    if cfg.fair_share:
        parts.append("fair share")
    if comp.stalled:
        parts.append("did not finish (not drawn): " + ", ".join(comp.stalled))
    return " · ".join(parts)


def figure(comp: Comparison):
    """The comparison as a matplotlib Figure (no pyplot: no global state, nothing to close)."""
    from matplotlib.figure import Figure

    names = list(comp.results)
    styles = _styles(names)
    fair = bool(comp.config.fair_share and comp.results)
    rows = [1.6, 0.16 * max(len(names), 1) + 0.5] + ([1.0] if fair else [])
    fig = Figure(figsize=(14, 1.2 + 3.4 * sum(rows) / 1.6), layout="constrained")
    grid = fig.add_gridspec(len(rows), 2, height_ratios=rows, width_ratios=[1.2, 1])
    ax_jct, ax_bound = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ax_use = fig.add_subplot(grid[1, :])
    fig.suptitle(title(comp), fontsize=14, fontweight="bold")
    fig.supxlabel(subtitle(comp), fontsize=9, color="0.35")
    fig.get_layout_engine().set(h_pad=0.1, hspace=0.05)

    _jct_cdf(ax_jct, comp, styles)
    _against_bounds(ax_bound, comp, styles)
    _occupancy(fig, ax_use, comp)
    if fair:
        _shares(fig.add_subplot(grid[2, :]), comp)
    return fig


def _jct_cdf(ax, comp: Comparison, styles: dict[str, dict]) -> None:
    for name, result in comp.results.items():
        s = styles[name]
        jcts = sorted(j["jct_s"] / 3600 for j in result.jobs)
        n = len(jcts)
        ax.step(
            [jcts[0], *jcts],
            [0.0, *((i + 1) / n for i in range(n))],
            where="post",
            label=f"{name} (ours)" if is_ours(name) else name,
            color=s["color"],
            lw=s["lw"],
            ls=s["ls"],
            alpha=s["alpha"],
            zorder=s["z"],
        )
    bound = comp.lower_bound.get("mean_jct_s")
    if bound:
        ax.axvline(bound / 3600, color="0.3", ls=":", lw=1.2, label="mean JCT lower bound")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs finished within")
    ax.set_ylim(0, 1.02)
    ax.set_title("How long jobs take (further left is better)", loc="left", fontsize=11)
    ax.grid(True, which="major", color="0.9")
    # outside the data: right of the panel, never over a line
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
        fontsize=9,
        handlelength=2.6,
    )


def _against_bounds(ax, comp: Comparison, styles: dict[str, dict]) -> None:
    """Mean JCT / its bound against makespan / its bound: (1, 1) is the unreachable ideal."""
    lb = comp.lower_bound
    if not (lb.get("makespan_s") and lb.get("mean_jct_s")):
        ax.set_visible(False)
        return
    points = {
        name: (s["makespan_s"] / lb["makespan_s"], s["mean_jct_s"] / lb["mean_jct_s"])
        for name, s in comp.summaries().items()
    }
    xs = [x for x, _ in points.values()] + [1.0]
    ys = [y for _, y in points.values()] + [1.0]
    pad_x, pad_y = 0.08 * (max(xs) - 1) + 0.02, 0.08 * (max(ys) - 1) + 0.05
    ax.set_xlim(1 - pad_x, max(xs) + pad_x * 2.5)
    ax.set_ylim(1 - pad_y, max(ys) + pad_y)
    ax.axvspan(ax.get_xlim()[0], 1.0, color="0.93", zorder=0)
    ax.axhspan(ax.get_ylim()[0], 1.0, color="0.93", zorder=0)
    ax.plot([1], [1], marker="*", ms=14, color="0.3", ls="none", zorder=3)
    ax.figure.draw_without_rendering()  # the final layout: data -> points as it will be drawn
    # every marker first, so that no label is written over a point
    placed = [_box(ax, x, y, -6, -6, 12, 12) for x, y in [*points.values(), (1.0, 1.0)]]
    for name, (x, y) in sorted(points.items(), key=lambda kv: (kv[1][1], kv[1][0])):
        s = styles[name]
        ours = is_ours(name)
        ax.scatter(
            [x],
            [y],
            s=130 if ours else 55,
            color=s["color"],
            alpha=1.0 if ours else 0.8,
            edgecolor="black" if ours else "none",
            zorder=s["z"] + 2,
        )
        label = f"{name} (ours)" if ours else name
        size = 10 if ours else 9
        _label(
            ax,
            (x, y),
            label,
            placed,
            fontsize=size,
            fontweight="bold" if ours else "normal",
            color=s["color"] if ours else "0.25",
            zorder=s["z"] + 3,
        )
    _label(ax, (1.0, 1.0), "lower bounds", placed, fontsize=8, color="0.35")
    ax.set_xlabel("makespan / its lower bound (grey: below a bound, out of reach)")
    ax.set_ylabel("mean JCT / its lower bound")
    ax.set_title("How close to the limits (lower left is better)", loc="left", fontsize=11)
    ax.grid(True, color="0.9")


def _box(ax, x: float, y: float, dx: float, dy: float, width: float, height: float) -> tuple:
    """A box in points around data point (x, y): lower left (x+dx, y+dy), that size."""
    px, py = ax.transData.transform((x, y)) * 72 / ax.figure.dpi
    return (px + dx, py + dy, px + dx + width, py + dy + height)


def _label(ax, xy: tuple[float, float], text: str, placed: list, fontsize: float, **kw) -> None:
    """Write ``text`` beside the point ``xy`` where it covers no marker or label placed so far
    (``placed`` grows by its box) and stays inside the axes: right of the point, else left,
    else further above or below with a line to the point."""
    width, height = 0.62 * fontsize * len(text) + 6, fontsize + 2  # a margin beyond the text
    x0, y0, x1, y1 = ax.get_window_extent().extents * 72 / ax.figure.dpi

    def free(box) -> bool:
        return (
            x0 <= box[0]
            and box[2] <= x1
            and y0 <= box[1]
            and box[3] <= y1
            and not any(
                box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed
            )
        )

    for dy in sorted(range(-90, 91, 10), key=abs):
        for side in (1, -1):
            dx = 8 if side > 0 else -8 - width
            if dy:  # off the point's height: a leader line, and the text clear of the point
                dx += 8 * side
            box = _box(ax, *xy, dx, dy - height / 2, width, height)
            if free(box):
                placed.append(box)
                ax.annotate(
                    text,
                    xy,
                    xytext=(dx if side > 0 else dx + width, dy),
                    textcoords="offset points",
                    ha="left" if side > 0 else "right",
                    va="center",
                    fontsize=fontsize,
                    arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.8} if dy else None,
                    **kw,
                )
                return
    ax.annotate(
        text, xy, xytext=(8, 0), textcoords="offset points", va="center", fontsize=fontsize, **kw
    )


def _busy_bins(timeline, start: float, end: float, width: float, bins: int) -> list[float]:
    """Mean GPUs allocated in each of ``bins`` bins of ``width`` seconds from ``start``."""
    acc = [0.0] * bins
    points = [*timeline, (end, 0)]
    for (t0, used), (t1, _) in itertools.pairwise(points):
        lo, hi = max(t0, start), min(t1, end)
        if hi <= lo or not used:
            continue
        b0, b1 = int((lo - start) // width), min(int((hi - start) // width), bins - 1)
        for b in range(b0, b1 + 1):
            overlap = min(hi, start + (b + 1) * width) - max(lo, start + b * width)
            if overlap > 0:
                acc[b] += used * overlap
    return [a / width for a in acc]


def _occupancy(fig, ax, comp: Comparison) -> None:
    """One strip per run: colour = GPUs allocated, blank after the run's last job finished."""
    import numpy as np

    total = comp.config.total_gpus
    results = list(comp.results.items())
    if not results:
        ax.set_visible(False)
        return
    start = min(j["submit_s"] for _, r in results for j in r.jobs)
    end = max(j["finish_s"] for _, r in results for j in r.jobs)
    width = max(end - start, 1e-9) / STRIP_BINS
    grid = np.full((len(results), STRIP_BINS), np.nan)
    for row, (_, result) in enumerate(results):
        finish = max(j["finish_s"] for j in result.jobs)
        values = _busy_bins(result.timeline, start, end, width, STRIP_BINS)
        last = min(math.ceil((finish - start) / width), STRIP_BINS)
        grid[row, :last] = values[:last]
    hours = (end - start) / 3600
    image = ax.imshow(
        grid,
        aspect="auto",
        interpolation="nearest",
        cmap="YlGnBu",
        vmin=0,
        vmax=total,
        extent=(0, hours, len(results) - 0.5, -0.5),
    )
    ax.set_facecolor("white")
    ax.set_yticks(range(len(results)))
    ax.set_yticklabels([f"{n} (ours)" if is_ours(n) else n for n, _ in results])
    for label, (name, _) in zip(ax.get_yticklabels(), results):
        if is_ours(name):
            label.set_fontweight("bold")
            label.set_color(OURS_COLOUR)
    for row, (_, result) in enumerate(results):
        span = (max(j["finish_s"] for j in result.jobs) - start) / 3600
        ax.plot([span, span], [row - 0.45, row + 0.45], color="black", lw=1.2)
        ax.annotate(
            f"{span:.1f} h",
            (span, row),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color="0.3",
        )
    ax.set_xlim(0, hours * 1.06)
    ax.set_xlabel("time since the first submission (hours); each strip ends when its last job does")
    ax.set_title(f"GPUs allocated over time (of {total})", loc="left", fontsize=11)
    bar = fig.colorbar(image, ax=ax, pad=0.01, fraction=0.03, aspect=12)
    bar.set_label("GPUs allocated")


def _shares(ax, comp: Comparison) -> None:
    """Each user's GPUs over time under the first run (stacked), for --fair-share."""
    name, result = next(iter(comp.results.items()))
    start = min(j["submit_s"] for j in result.jobs)
    end = max(j["finish_s"] for j in result.jobs)
    users = sorted({j["user"] for j in result.jobs})
    points = [*result.user_timeline, (end, {})]
    ts = [(t - start) / 3600 for t, _ in points]
    held = [[held.get(u, 0) for _, held in points] for u in users]
    ax.stackplot(ts, held, labels=users, step="post")
    ax.set_xlabel("time since the first submission (hours)")
    ax.set_ylabel("GPUs held")
    ax.set_title(f"GPUs held per user ({name}, fair share)", loc="left", fontsize=11)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
