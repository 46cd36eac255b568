"""The figure of ``simulate --plot``, read back through matplotlib's objects: a title that names
the workload and the cluster, every line labelled, the legend off the data, our policy set apart,
one occupancy strip per run, and each run placed against the lower bounds."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.sim.compare import compare
from jupyter_elastic_gpu.sim.engine import SimConfig
from jupyter_elastic_gpu.sim.generate import generate_workload
from jupyter_elastic_gpu.sim.plot import OURS_COLOUR, figure

RUNS = ["static", "adaptive", "termination", "srtf"]


@pytest.fixture(scope="module")
def comp():
    workload = generate_workload(3, jobs=16, window_s=3600, max_gpus=4, name="lab-3")
    return compare(workload, RUNS, SimConfig(nodes=2, gpus_per_node=2), progress=False)


@pytest.fixture(scope="module")
def fig(comp):
    fig = figure(comp)
    fig.draw_without_rendering()  # lay it out as a saved file is
    return fig


def _axes(fig, title: str):
    (ax,) = [a for a in fig.axes if a.get_title(loc="left").startswith(title)]
    return ax


def test_the_title_names_the_workload_and_the_cluster(fig):
    assert fig.get_suptitle() == "lab-3: 16 jobs on 4 GPUs (2 nodes x 2)"
    assert "sidecar resize 6 s" in fig._supxlabel.get_text()


def test_every_line_is_labelled_and_the_legend_is_off_the_data(fig):
    ax = _axes(fig, "How long jobs take")
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == [
        *(f"{r} (ours)" if r == "adaptive" else r for r in RUNS),
        "mean JCT lower bound",
    ]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == labels
    box, data = legend.get_window_extent(), ax.get_window_extent()
    assert box.x0 >= data.x1  # beside the panel, never over a line
    assert ax.get_xlabel() and ax.get_ylabel()


def test_ours_is_drawn_strong_and_the_others_muted(fig):
    ax = _axes(fig, "How long jobs take")
    lines = {line.get_label(): line for line in ax.get_lines()}
    ours = lines.pop("adaptive (ours)")
    lines.pop("mean JCT lower bound")
    assert ours.get_color() == OURS_COLOUR and ours.get_alpha() == 1.0
    for other in lines.values():
        assert other.get_linewidth() < ours.get_linewidth() / 2
        assert other.get_alpha() < 1.0 and other.get_color() != OURS_COLOUR


def test_occupancy_is_one_strip_per_run(fig, comp):
    ax = _axes(fig, "GPUs allocated over time")
    (image,) = ax.get_images()
    grid = image.get_array()
    assert grid.shape[0] == len(RUNS)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        f"{r} (ours)" if r == "adaptive" else r for r in RUNS
    ]
    assert image.norm.vmin == 0 and image.norm.vmax == 4
    # the strip's mean over the run is the run's GPU-time over its makespan
    for row, name in enumerate(RUNS):
        s = comp.results[name].summary()
        cells = grid[row].compressed()
        assert cells.mean() == pytest.approx(s["utilization"] * 4, rel=0.02)


def test_each_run_stands_against_the_lower_bounds(fig, comp):
    ax = _axes(fig, "How close to the limits")
    points = {}
    for collection in ax.collections:
        for x, y in collection.get_offsets():
            points[(round(x, 6), round(y, 6))] = collection
    lb = comp.lower_bound
    for name in RUNS:
        s = comp.results[name].summary()
        key = (
            round(s["makespan_s"] / lb["makespan_s"], 6),
            round(s["mean_jct_s"] / lb["mean_jct_s"], 6),
        )
        assert key in points, name
    texts = {t.get_text() for t in ax.texts}
    assert texts >= {"static", "adaptive (ours)", "termination", "srtf", "lower bounds"}
    assert ax.get_xlim()[0] < 1 and ax.get_ylim()[0] < 1  # the bounds are on the page
