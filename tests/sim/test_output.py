"""Result files: checked before the work, written whole (``jupyter_elastic_gpu.sim.output``)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from matplotlib.figure import Figure

from jupyter_elastic_gpu.sim.output import (
    output_file,
    output_folder,
    plot_formats,
    save_figure,
    write_json,
)


def test_a_file_in_a_folder_one_can_write_passes_and_nothing_is_left_there(tmp_path):
    assert output_file(str(tmp_path / "r.json"), "--json") == tmp_path / "r.json"
    assert output_file(str(tmp_path / "r.SVG"), "--plot", plot_formats()) == tmp_path / "r.SVG"
    assert list(tmp_path.iterdir()) == []  # (the probe of the folder is gone)


@pytest.mark.parametrize(
    ("path", "formats", "message"),
    [
        ("{tmp}/no/r.json", None, "--out {tmp}/no/r.json: there is no folder {tmp}/no; create it"),
        ("{tmp}", None, "--out {tmp}: is a folder; name a file in it"),
        ("{tmp}/r.txt", ("png", "svg"), "--out {tmp}/r.txt: its suffix says the format, one of "),
        ("/proc/r.json", None, "--out /proc/r.json: cannot write in /proc ("),
    ],
)
def test_a_place_one_cannot_write_to_is_said_with_what_to_do(tmp_path, path, formats, message):
    with pytest.raises(ValueError) as e:
        output_file(path.format(tmp=tmp_path), "--out", formats)
    assert message.format(tmp=tmp_path) in str(e.value)


def test_a_folder_is_made_and_a_file_is_no_folder(tmp_path):
    made = output_folder(str(tmp_path / "a" / "b"), "--plot-dir")
    assert made.is_dir()
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match=r"--plot-dir .*/f: is a file; name a folder"):
        output_folder(str(tmp_path / "f"), "--plot-dir")


def test_a_failed_write_leaves_the_old_file_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    target.write_text("good")

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the new file is written, then the disk is full
    with pytest.raises(OSError, match="No space left"):
        write_json(target, {"makespan_s": 1.0})
    assert target.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_results_replace_the_file_whole_with_the_usual_permissions(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")
    write_json(target, {"makespan_s": 1.0})
    assert json.loads(target.read_text()) == {"makespan_s": 1.0}
    figure = tmp_path / "r.svg"
    save_figure(Figure(), figure, dpi=50)
    assert figure.read_text().lstrip().startswith("<?xml")
    mask = os.umask(0)
    os.umask(mask)
    for path in (target, figure):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask  # as open() makes a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.svg"]
