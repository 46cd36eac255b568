"""The native workload format and the shared CSV helpers: exact values and error reports."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from jupyter_elastic_gpu.sim.traces.csvutil import (
    open_csv,
    parse_float,
    parse_int,
    parse_nonnegative,
    read_rows,
)
from jupyter_elastic_gpu.sim.traces.native import read_native, read_profiles, write_native
from jupyter_elastic_gpu.sim.workload import JobSpec, TraceError, Workload, profile_throughput

FIXTURES = Path(__file__).parent / "fixtures" / "native"
JOBS, PROFILES = FIXTURES / "jobs.csv", FIXTURES / "profiles.csv"

HEADER = "job_id,submit_time,user,profile,requested_gpus,min_gpus,max_gpus,work\n"
GOOD_PROFILES = "profile,gpus,throughput\np,1,10\np,2,18\np,4,30\n"


def test_reads_fixture_exactly():
    w = read_native(JOBS, PROFILES)
    assert w.name == "jobs"
    assert [j.job_id for j in w.jobs] == ["a", "c", "b"]  # sorted by submit time
    a, c, b = w.jobs
    resnet = {1: 100.0, 2: 180.0, 4: 320.0}
    assert a == JobSpec("a", 0.0, 36000.0, resnet, 1, 4, 2, "alice", "resnet")  # max capped
    assert c == JobSpec("c", 10.0, 64000.0, resnet, 4, 4, 4, "default", "resnet")
    assert b == JobSpec("b", 30.5, 3000.0, {1: 50.0, 2: 60.5}, 1, 2, 1, "bob", "lstm")
    assert a.profile is c.profile  # one table per profile, shared
    assert profile_throughput(a.profile, 3) == 250.0  # interpolated between 2 and 4
    assert read_native(JOBS, PROFILES, name="lab").name == "lab"


def test_read_profiles():
    assert read_profiles(PROFILES) == {
        "resnet": {1: 100.0, 2: 180.0, 4: 320.0},
        "lstm": {1: 50.0, 2: 60.5},
    }


def test_optional_columns_default_to_a_rigid_job(tmp_path):
    jobs, profiles = _write(
        tmp_path, "job_id,submit_time,profile,requested_gpus,work\nx,5,p,2,90\n"
    )
    (job,) = read_native(jobs, profiles).jobs
    assert (job.user, job.min_gpus, job.max_gpus, job.requested_gpus) == ("default", 2, 2, 2)


def test_round_trip(tmp_path):
    w = read_native(JOBS, PROFILES)
    write_native(w, tmp_path / "j.csv", tmp_path / "p.csv")
    back = read_native(tmp_path / "j.csv", tmp_path / "p.csv")
    assert back.jobs == w.jobs
    assert (tmp_path / "j.csv").read_text().splitlines()[0] == HEADER.strip()


def test_a_job_s_own_restart_time_reads_and_writes_back(tmp_path):
    jobs, profiles = _write(
        tmp_path,
        "job_id,submit_time,profile,requested_gpus,work,restart_s\nx,5,p,2,90,250\ny,6,p,1,9,\n",
    )
    x, y = read_native(jobs, profiles).jobs
    assert (x.restart_s, y.restart_s) == (250.0, None)  # empty: the run's costs
    w = Workload("w", [x, y])
    write_native(w, tmp_path / "j.csv", tmp_path / "p.csv")
    assert read_native(tmp_path / "j.csv", tmp_path / "p.csv").jobs == w.jobs
    assert (tmp_path / "j.csv").read_text().splitlines()[0] == HEADER.strip() + ",restart_s"
    err = _error(tmp_path, HEADER.strip() + ",restart_s\na,0,u,p,1,1,1,10,-1\n")
    _assert_names(err, "jobs.csv", 1, "restart_s")


def test_write_keeps_awkward_values_exact(tmp_path):
    t1 = {1: 0.1 + 0.2, 3: 1e-7}
    t2 = {1: 2.0}
    w = Workload(
        "w",
        [
            JobSpec("x,1", 1 / 3, 12345.678901234567, t1, 1, 3, 2, 'u "q"', "same"),
            JobSpec("x2", 2.0, 0.0, t2, 1, 1, 1, "", "same"),  # same name, other table
            JobSpec("x3", 3.0, 1.0, t2, 1, 1, 1, "v", ""),  # no name
        ],
    )
    write_native(w, tmp_path / "j.csv", tmp_path / "p.csv")
    back = read_native(tmp_path / "j.csv", tmp_path / "p.csv").jobs
    assert [j.profile_name for j in back] == ["same", "same-2", "profile-1"]
    assert [j.user for j in back] == ['u "q"', "default", "v"]
    for got, want in zip(back, w.jobs):
        assert (got.job_id, got.submit_time, got.work) == (want.job_id, want.submit_time, want.work)
        assert got.profile == want.profile


def test_write_rejects_a_profile_the_reader_would_refuse(tmp_path):
    w = Workload("w", [JobSpec("x", 0.0, 1.0, {1: 0.0}, 1, 1, 1)])
    with pytest.raises(ValueError, match="job x"):
        write_native(w, tmp_path / "j.csv", tmp_path / "p.csv")


# --- bad input: every case names the file, the row and the column ---------------------------


def _write(tmp_path, jobs_text, profiles_text=GOOD_PROFILES):
    jobs, profiles = tmp_path / "jobs.csv", tmp_path / "profiles.csv"
    jobs.write_text(jobs_text)
    profiles.write_text(profiles_text)
    return jobs, profiles


def _error(tmp_path, jobs_text, profiles_text=GOOD_PROFILES) -> TraceError:
    jobs, profiles = _write(tmp_path, jobs_text, profiles_text)
    with pytest.raises(TraceError) as info:
        read_native(jobs, profiles)
    message = str(info.value)
    assert "\n" not in message
    return info.value


def _assert_names(err: TraceError, file: str, row: int | None, column: str | None):
    message = str(err)
    assert message.startswith(str(Path(err.path))) and Path(err.path).name == file, message
    assert err.row == row, message
    assert err.column == column, message
    if row is not None:
        assert f"row {row}" in message
    if column is not None:
        assert f"column '{column}'" in message


@pytest.mark.parametrize(
    ("jobs_rows", "row", "column", "words"),
    [
        ("a,zero,u,p,1,1,1,10\n", 1, "submit_time", "expected a number"),
        ("a,0,u,p,1,1,1,10\nb,-1,u,p,1,1,1,10\n", 2, "submit_time", "negative"),
        ("a,0,u,p,1,1,1,-5\n", 1, "work", "negative"),
        ("a,0,u,p,1,1,1,nan\n", 1, "work", "finite"),
        ("a,0,u,p,1,1,1,\n", 1, "work", "missing value"),
        ("a,0,u,p,one,1,1,10\n", 1, "requested_gpus", "whole number"),
        ("a,0,u,p,1.5,1,2,10\n", 1, "requested_gpus", "whole number"),
        ("a,0,u,nope,1,1,1,10\n", 1, "profile", "unknown profile 'nope'"),
        ("a,0,u,p,1,0,1,10\n", 1, "min_gpus", "at least 1"),
        ("a,0,u,p,2,3,2,10\n", 1, "min_gpus", "above max_gpus"),
        ("a,0,u,p,8,8,8,10\n", 1, "min_gpus", "largest GPU count listed"),
        ("a,0,u,p,3,1,2,10\n", 1, "requested_gpus", "must lie between"),
        ("a,0,u,p,1,2,4,10\n", 1, "requested_gpus", "must lie between"),
        ("a,0,u,p,6,1,8,10\n", 1, "requested_gpus", "capped at 4"),
        ("a,0,u,p,1,1,1,10\nb,0,u,p,1,1,1,10\na,5,u,p,1,1,1,10\n", 3, "job_id", "first at row 1"),
        (",0,u,p,1,1,1,10\n", 1, "job_id", "missing value"),
    ],
)
def test_bad_job_rows(tmp_path, jobs_rows, row, column, words):
    err = _error(tmp_path, HEADER + jobs_rows)
    _assert_names(err, "jobs.csv", row, column)
    assert words in str(err)


@pytest.mark.parametrize(
    ("profile_rows", "row", "column", "words"),
    [
        ("p,1,0\n", 1, "throughput", "positive"),
        ("p,1,10\np,2,-3\n", 2, "throughput", "positive"),
        ("p,1,fast\n", 1, "throughput", "expected a number"),
        ("p,0,10\n", 1, "gpus", "at least 1"),
        ("p,1,10\np,1,12\n", 2, "gpus", "already lists 1 GPUs (row 1)"),
        (",1,10\n", 1, "profile", "missing value"),
    ],
)
def test_bad_profile_rows(tmp_path, profile_rows, row, column, words):
    err = _error(
        tmp_path, HEADER + "a,0,u,p,1,1,1,10\n", "profile,gpus,throughput\n" + profile_rows
    )
    _assert_names(err, "profiles.csv", row, column)
    assert words in str(err)


def test_missing_column_is_named(tmp_path):
    err = _error(tmp_path, "job_id,submit_time,profile,requested_gpus\na,0,p,1\n")
    _assert_names(err, "jobs.csv", None, "work")
    assert "header" in str(err) and "found: job_id, submit_time" in str(err)
    err = _error(tmp_path, HEADER + "a,0,u,p,1,1,1,10\n", "profile,gpus\np,1\n")
    _assert_names(err, "profiles.csv", None, "throughput")


@pytest.mark.parametrize(
    ("jobs_text", "profiles_text", "file", "words"),
    [
        ("", GOOD_PROFILES, "jobs.csv", "empty file"),
        ("\n\n", GOOD_PROFILES, "jobs.csv", "empty file"),
        (HEADER, GOOD_PROFILES, "jobs.csv", "no jobs"),
        (HEADER + "a,0,u,p,1,1,1,10\n", "", "profiles.csv", "empty file"),
        (HEADER + "a,0,u,p,1,1,1,10\n", "profile,gpus,throughput\n", "profiles.csv", "no profiles"),
    ],
)
def test_empty_files(tmp_path, jobs_text, profiles_text, file, words):
    err = _error(tmp_path, jobs_text, profiles_text)
    assert Path(err.path).name == file and words in str(err)


def test_malformed_rows(tmp_path):
    err = _error(tmp_path, HEADER + "a,0,u,p,1,1,1,10\nb,0,u,p,1,1,1,10,1,2\n")
    _assert_names(err, "jobs.csv", 2, None)
    assert "header has 8 columns" in str(err)
    # Trailing empty cells (spreadsheet exports) are fine, and so are short optional rows.
    jobs, profiles = _write(tmp_path, HEADER + "a,0,u,p,1,1,1,10,,\n")
    assert len(read_native(jobs, profiles)) == 1


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="cannot read"):
        read_native(tmp_path / "nope.csv", PROFILES)


# --- csvutil ---------------------------------------------------------------------------------


def test_rows_are_numbered_from_one_after_the_header_counting_blank_lines(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("\ufeff a , b \n1,2\n\n 3 ,4\n")  # BOM, spaces, a blank line
    with open_csv(path, ["a", "b"]) as reader:
        assert reader.columns == ("a", "b")
        rows = list(reader)
    assert [(r.number, r.get_int("a"), r.raw("b")) for r in rows] == [(1, 1, "2"), (3, 3, "4")]
    assert rows[1].raw("absent") == "" and not rows[1].has("absent")
    assert rows[1].get_str("absent", default="d") == "d"
    assert rows[1].as_dict() == {"a": "3", "b": "4"}


def test_typed_accessors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("n,x\n4.0,-2.5\n")
    (row,) = read_rows(path)
    assert row.get_int("n") == 4  # integral floats are whole numbers
    assert row.get_float("x") == -2.5
    with pytest.raises(TraceError, match=r"t\.csv, row 1, column 'x': must not be negative"):
        row.get_nonnegative("x")
    with pytest.raises(TraceError, match="must be at least 5"):
        row.get_int("n", minimum=5)
    with pytest.raises(TraceError, match="must be positive"):
        row.get_float("x", positive=True)
    with pytest.raises(TraceError, match=r"row 1, column 'n': bad"):
        raise row.error("bad", "n")


def test_parse_functions():
    assert parse_float(" 1e3", "f.csv", 2, "c") == 1000.0
    assert parse_nonnegative("0", "f.csv", 2, "c") == 0.0
    assert parse_int("-3", "f.csv", 2, "c") == -3
    for bad in ("inf", "x", ""):
        with pytest.raises(TraceError, match=r"^f\.csv, row 2, column 'c': "):
            parse_float(bad, "f.csv", 2, "c")
    with pytest.raises(TraceError, match="whole number"):
        parse_int("2.5", "f.csv", 2, "c")
    with pytest.raises(TraceError, match="at least 2"):
        parse_float("1", "f.csv", 2, "c", minimum=2)


def test_duplicate_header_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b,a\n1,2,3\n")
    with pytest.raises(TraceError, match=r"column 'a': appears twice in the header"):
        read_rows(path)


def test_gzipped_files_read_like_plain_ones(tmp_path):
    jobs, profiles = tmp_path / "jobs.csv.gz", tmp_path / "profiles.csv.gz"
    jobs.write_bytes(gzip.compress(JOBS.read_bytes()))
    profiles.write_bytes(gzip.compress(PROFILES.read_bytes()))
    w = read_native(jobs, profiles)
    assert w.name == "jobs"  # the stem without .csv.gz
    assert w.jobs == read_native(JOBS, PROFILES).jobs
    # Recognised by content, not by name; rows keep their numbers.
    odd = tmp_path / "t.txt"
    odd.write_bytes(gzip.compress("\ufeffa,b\n1,2\n\n3,x\n".encode()))
    rows = read_rows(odd)
    assert [(r.number, r.raw("b")) for r in rows] == [(1, "2"), (3, "x")]
    with pytest.raises(TraceError, match=r"t\.txt, row 3, column 'b': expected a number"):
        rows[1].get_float("b")


def test_damaged_gzip_is_one_line_error(tmp_path):
    packed = gzip.compress(HEADER.encode() + b"a,0,u,p,1,1,1,10\n" * 2000)
    truncated = tmp_path / "jobs.csv.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(TraceError) as info:
        read_rows(truncated)
    assert str(info.value).startswith(f"{truncated}, row ") and "\n" not in str(info.value)
    assert "cannot read the file" in str(info.value)
    garbage = tmp_path / "g.csv.gz"
    garbage.write_bytes(b"\x1f\x8b" + b"not gzip at all")
    with pytest.raises(TraceError, match=r"g\.csv\.gz: cannot read the file"):
        read_rows(garbage)
