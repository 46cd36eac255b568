"""Print, save and plot a comparison: the table people read, the JSON tools read."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.fairshare import format_days
from . import output
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
        f"{cfg.layout()}; times in seconds\n"
        f"mechanisms: sidecar {costs.sidecar_s:g} s per resize; termination "
        f"{costs.termination_s:g} s restart + work since the last checkpoint (every "
        f"{costs.checkpoint_interval:g} s); start {cfg.start_cost_s:g} s; "
        f"{'decisions every ' + format(cfg.tick_s, 'g') + ' s only' if cfg.rounds else 'decisions at every event and every ' + format(cfg.tick_s, 'g') + ' s'}"
    )
    if comp.own_restarts:
        head += f"; {comp.own_restarts} of the jobs restart in a time of their own (restart_s)"
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
    output.write_json(path, comp.to_json())


def plot(comp: Comparison, path: str) -> None:
    """Write the comparison's figure (sim/plot.py) to ``path`` (PNG, SVG, PDF by its suffix)."""
    from .plot import figure

    output.save_figure(figure(comp), path, dpi=110)
