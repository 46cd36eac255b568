"""Print, save and plot a comparison: the table people read, the JSON tools read."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..core.fairshare import format_days
from .compare import Comparison

BASELINES = ("static", "termination")
_COLUMNS = (
    ("makespan", "makespan_s", "{:,.0f}"),
    ("mean JCT", "mean_jct_s", "{:,.0f}"),
    ("median JCT", "median_jct_s", "{:,.0f}"),
    ("p95 JCT", "p95_jct_s", "{:,.0f}"),
    ("GPU util", "utilization", "{:.0%}"),
    ("resizes", "resizes", "{:d}"),
    ("lost GPU-h", "lost_gpu_s", None),
)


def _grid(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ratio(ours: float, baseline: float) -> str:
    """'0.56x (-44%)': ours as a multiple of the baseline, and the change."""
    if baseline <= 0:
        return "n/a"
    r = ours / baseline
    return f"{r:.2f}x ({r - 1:+.0%})"


def format_table(comp: Comparison) -> str:
    s = comp.summaries()
    cfg, costs = comp.config, comp.costs
    head = (
        f"workload {comp.workload}: {comp.jobs} jobs on "
        f"{cfg.nodes} x {cfg.gpus_per_node} GPUs; times in seconds\n"
        f"mechanisms: sidecar {costs.sidecar_s:g} s per resize; termination "
        f"{costs.termination_s:g} s restart + work since the last checkpoint (every "
        f"{costs.checkpoint_interval:g} s); start {cfg.start_cost_s:g} s; "
        f"{'decisions every ' + format(cfg.tick_s, 'g') + ' s only' if cfg.rounds else 'decisions at every event and every ' + format(cfg.tick_s, 'g') + ' s'}"
    )
    if cfg.user_gpu_cap:
        head += f"; at most {cfg.user_gpu_cap} GPUs per user"
    if cfg.fair_share:
        head += f"; fair share (usage half-life {format_days(cfg.fair_share_half_life)})"
    rows = [["policy", *(c[0] for c in _COLUMNS)]]
    for name, summary in s.items():
        cells = []
        for _, key, fmt in _COLUMNS:
            value = summary[key]
            cells.append(f"{value / 3600:,.1f}" if fmt is None else fmt.format(value))
        rows.append([name, *cells])
    lb = comp.lower_bound
    rows.append(
        ["lower bound", f"{lb['makespan_s']:,.0f}", f"{lb['mean_jct_s']:,.0f}", "", "", "", "", ""]
    )
    out = [head, "", _grid(rows)]

    baselines = [b for b in BASELINES if b in s]
    others = [n for n in s if n not in baselines or len(baselines) > 1]
    if baselines and others:
        header = ["ratio (lower is better)"]
        for b in baselines:
            header += [f"makespan vs {b}", f"mean JCT vs {b}"]
        header += ["makespan vs bound"]
        rows = [header]
        for name in s:
            if name in baselines and len(baselines) == 1:
                continue
            row = [name]
            for b in baselines:
                if b == name:
                    row += ["-", "-"]
                else:
                    row += [
                        ratio(s[name]["makespan_s"], s[b]["makespan_s"]),
                        ratio(s[name]["mean_jct_s"], s[b]["mean_jct_s"]),
                    ]
            row.append(ratio(s[name]["makespan_s"], lb["makespan_s"]))
            rows.append(row)
        out += ["", _grid(rows)]
    if cfg.user_gpu_cap and comp.results:
        out += ["", _users_table(comp)]
    if cfg.fair_share and comp.results:
        out += ["", _shares_table(comp)]
    for name, why in comp.stalled.items():
        out += ["", f"{name}: did not finish: {why}"]
    return "\n".join(out)


def _users_table(comp: Comparison) -> str:
    """Per policy: the most GPUs one user held at once (at most the cap), and each user's
    GPU-hours, largest first."""
    rows = [["per user", "most GPUs at once", "GPU-h held by user"]]
    for name, result in comp.results.items():
        users = result.users()
        peak = max((u["peak_gpus"] for u in users.values()), default=0)
        ranked = sorted(users.items(), key=lambda kv: (-kv[1]["gpu_s"], kv[0]))
        held = ", ".join(f"{user} {u['gpu_s'] / 3600:,.1f}" for user, u in ranked)
        rows.append([name, str(peak), held])
    return _grid(rows)


#: Slices of the run in the per-user share table.
SHARE_SLICES = 8


def _shares_table(comp: Comparison) -> str:
    """Per policy and user: the weight's share, the share of GPU-time held over the run, and
    the share of all GPUs held in each of ``SHARE_SLICES`` equal slices of the run."""
    weights = comp.config.user_weights
    rows = [
        [
            "share of the GPUs",
            "user",
            "weight",
            "held",
            *(f"{i + 1}/{SHARE_SLICES}" for i in range(SHARE_SLICES)),
        ]
    ]
    for name, result in comp.results.items():
        shares = result.user_shares(SHARE_SLICES)["users"]
        held = {u: v["gpu_s"] for u, v in result.users().items()}
        total_held = sum(held.values()) or 1.0
        total_w = sum(weights.get(u, 1.0) for u in shares)
        for user, slices in shares.items():
            rows.append(
                [
                    name,
                    user,
                    f"{weights.get(user, 1.0) / total_w:.0%}",
                    f"{held.get(user, 0.0) / total_held:.0%}",
                    *(f"{x:.0%}" for x in slices),
                ]
            )
    return _grid(rows)


def write_json(comp: Comparison, path: str) -> None:
    with open(path, "w") as f:
        json.dump(comp.to_json(), f, indent=1)


def plot(comp: Comparison, path: str) -> None:
    """JCT distribution (CDF) and GPUs in use over time, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fair = comp.config.fair_share and comp.results
    fig, axes = plt.subplots(1, 3 if fair else 2, figsize=(18 if fair else 12, 4.5))
    ax_jct, ax_use = axes[0], axes[1]
    for name, result in comp.results.items():
        jcts = sorted(j["jct_s"] / 3600 for j in result.jobs)
        n = len(jcts)
        ax_jct.step(jcts, [(i + 1) / n for i in range(n)], where="post", label=name)
        start = min(j["submit_s"] for j in result.jobs)
        ts = [(t - start) / 3600 for t, _ in result.timeline]
        used = [u for _, u in result.timeline]
        ax_use.step(ts, used, where="post", label=name, linewidth=1)
    ax_jct.set_xscale("log")
    ax_jct.set_xlabel("job completion time (hours, log scale)")
    ax_jct.set_ylabel("fraction of jobs")
    ax_jct.set_title("JCT distribution")
    ax_jct.axvline(comp.lower_bound["mean_jct_s"] / 3600, color="grey", ls=":", lw=1)
    ax_jct.legend()
    total = comp.config.nodes * comp.config.gpus_per_node
    ax_use.axhline(total, color="grey", ls=":", lw=1)
    ax_use.set_xlabel("time since the first submission (hours)")
    ax_use.set_ylabel("GPUs allocated")
    ax_use.set_title(f"GPU occupancy ({total} GPUs)")
    ax_use.legend()
    if fair:
        _plot_shares(axes[2], comp)
    fig.suptitle(f"{comp.workload}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_shares(ax, comp: Comparison) -> None:
    """Each user's share of the GPUs over time under the first policy (stacked)."""
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
    ax.set_title(f"GPUs held per user ({name}, fair share)")
    ax.legend(loc="upper right", fontsize="small")
