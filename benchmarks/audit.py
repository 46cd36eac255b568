"""The reliability audit's figures: every fault and crash scenario, and the fuzzing, in one table.

Runs the fault suite (tests/faults) in a pytest subprocess, each test appending its figures
to a file (``$ELASTIC_GPU_AUDIT_OUT``, see tests/faults/faultkit.py): storage faults (a locked
database, a full disk, a failing disk, a read-only one), a bad job row and a damaged database
file, two schedulers on one database, the doctor, and the crash suite (kill -9 of the Jupyter
server, the shared scheduler, sidecars and trainers at seeded points of synthetic jobs'
lives). Then, unless ``--no-fuzz``, the adversarial suite's fuzzing of every route
(``benchmarks/fuzz_audit.py``, tests/adversarial). It prints one row per scenario: the runs
(and how many passed), the answers by status class, the 5xx answers that did not say why
(no ``reason``: an "Unhandled error"), the progress records acknowledged to a sidecar and
those of them missing from the database afterwards, and the jobs left stuck.

    python benchmarks/audit.py [--seeds 1,2] [--fuzz-examples 500] [--no-fuzz] [--json out.json]

Some storage faults need root (a tmpfs to fill, or to make read-only): elsewhere they are
skipped, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from _common import REPO, command_line, output_file, whole, write_json

from jupyter_elastic_gpu.options import Parser

#: Test name (without its parameters) -> the scenario it is, in the table's order.
SCENARIOS = {
    "test_a_locked_database_answers_503_and_recovers": "database locked past the busy timeout",
    "test_a_full_disk_answers_507_and_recovers": "disk full (a filled tmpfs)",
    "test_a_failing_disk_answers_503_and_recovers": "disk failing (EFBIG: SQLite I/O error)",
    "test_a_read_only_database_at_start_answers_503_until_it_is_writable": (
        "database read-only at start"
    ),
    "test_refused_requests_change_nothing": "refused request changes nothing (in process)",
    "test_a_refused_decision_changes_nothing_and_the_loop_retries": (
        "refused decision changes nothing, loop retries"
    ),
    "test_the_progress_of_a_sidecar_given_up_on_is_kept": "progress of a sidecar given up on",
    "test_a_bad_job_row_is_quarantined_and_the_rest_serves": "one job row that does not parse",
    "test_a_damaged_database_answers_503_everywhere_until_repaired": (
        "damaged database file (embedded)"
    ),
    "test_the_shared_scheduler_refuses_a_damaged_database": "damaged database file (shared)",
    "test_a_second_server_on_one_database_is_refused_with_the_holders_pid": (
        "second server on one database"
    ),
    "test_a_second_shared_scheduler_exits_with_the_holders_pid": (
        "second shared scheduler on one database"
    ),
    "test_exit_status_and_the_default_databases": "doctor: checks and exit status",
    "test_repair_is_refused_while_a_scheduler_holds_the_database": "doctor: repair refused in use",
    "test_a_damaged_file_is_kept_and_what_can_be_read_is_recovered": "doctor: damaged file",
    "test_kills_in_the_embedded_scheduler": "kill -9 server, sidecars, trainers",
    "test_kills_around_the_shared_scheduler": "kill -9 shared scheduler, server, ...",
    "test_progress_written_while_the_server_is_down_reaches_the_database": (
        "progress written while the server is down"
    ),
}
COLUMNS = ("runs", "2xx", "4xx", "5xx", "unexplained 5xx", "acknowledged", "lost", "jobs", "stuck")


def run_faults(seeds: str, timeout: float = 1800.0) -> dict:
    """The fault suite's figures: ``{"command", "seconds", "exit_code", "rows", "kills",
    "skipped"}``, ``rows`` per scenario (the columns above and ``passed``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out, junit = Path(tmp) / "audit.jsonl", Path(tmp) / "junit.xml"
        env = dict(os.environ, ELASTIC_GPU_AUDIT_OUT=str(out), ELASTIC_GPU_CRASH_SEEDS=seeds)
        args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, *args, "tests/faults"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        seconds = time.monotonic() - started
        figures = (
            [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        )
        outcomes = _outcomes(junit)
    rows: dict[str, Counter] = {}
    kills: list[str] = []
    for doc in figures:
        name = doc["case"].split("::")[-1].split("[")[0]
        row = rows.setdefault(SCENARIOS.get(name, name), Counter())
        row["runs"] += 1
        row["passed"] += outcomes.get(doc["case"]) == "passed"
        row.update(doc["answers"])
        for key in ("unexplained", "acknowledged", "lost", "jobs", "stuck"):
            row["unexplained 5xx" if key == "unexplained" else key] += doc[key]
        kills += doc.get("kills", [])
    skipped = sorted(case for case, outcome in outcomes.items() if outcome == "skipped")
    order = list(dict.fromkeys(SCENARIOS.values()))
    return {
        "command": f"ELASTIC_GPU_CRASH_SEEDS={seeds} python -m pytest tests/faults",
        "seconds": round(seconds, 1),
        "exit_code": done.returncode,
        "rows": {k: dict(rows[k]) for k in sorted(rows, key=lambda k: _index(order, k))},
        "kills": kills,
        "skipped": skipped,
        "tail": (done.stdout + done.stderr)[-3000:] if done.returncode else "",
    }


def _index(order: list[str], key: str) -> int:
    return order.index(key) if key in order else len(order)


def _outcomes(junit: Path) -> dict[str, str]:
    """{node id: passed | failed | skipped} from pytest's junit report."""
    if not junit.exists():
        return {}
    out = {}
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        node = f"{module}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[node] = (
            "failed"
            if kinds & {"failure", "error"}
            else "skipped"
            if "skipped" in kinds
            else "passed"
        )
    return out


def table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(row: list[str]) -> str:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(head), rule, *(fmt(r) for r in rows)])


def seed_list(text: str) -> str:
    """``--seeds``: whole numbers separated by commas, as the fault suite reads them."""
    parts = text.split(",")
    if not all(p.strip().lstrip("-").isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"must be whole numbers separated by commas, got {text!r}")
    return ",".join(p.strip() for p in parts)


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seeds", type=seed_list, default="1,2", help="seeds of the crash runs (default 1,2)"
    )
    parser.add_argument("--fuzz-examples", type=whole(), default=500, help="examples per fuzz test")
    parser.add_argument("--no-fuzz", action="store_true", help="leave out the fuzzing")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    output_file(parser, args.json, "--json")
    print(f"$ {command_line()}\n")
    faults = run_faults(args.seeds)
    head = ["scenario", *COLUMNS]
    rows, total = [], Counter()
    for name, row in faults["rows"].items():
        total.update(row)
        runs = f"{row.get('passed', 0)}/{row['runs']} passed"
        rows.append([name, runs, *(str(row.get(c, 0)) for c in COLUMNS[1:])])
    fuzz = None
    if not args.no_fuzz and (REPO / "benchmarks" / "fuzz_audit.py").exists():
        from fuzz_audit import run_fuzz_audit

        fuzz = run_fuzz_audit(args.fuzz_examples)
        t = fuzz["totals"]
        rows.append(
            [
                f"fuzzing every route ({args.fuzz_examples} examples a test)",
                f"{t['sent']} requests",
                *(str(t.get(c, 0)) for c in ("2xx", "4xx", "5xx")),
                f"{t.get('invalid', 0)} invalid",
                "-",
                "-",
                "-",
                "-",
            ]
        )
    all_passed = sum(r.get("passed", 0) for r in faults["rows"].values())
    runs = sum(r["runs"] for r in faults["rows"].values())
    rows.append(
        [
            "total (fault suite)",
            f"{all_passed}/{runs} passed",
            *(str(total.get(c, 0)) for c in COLUMNS[1:]),
        ]
    )
    print(table(head, rows))
    print(
        f"\nfault suite: {faults['command']} ({faults['seconds']:.0f} s, pytest exit "
        f"{faults['exit_code']}); crash kills: {len(faults['kills'])} "
        f"({', '.join(sorted(set(k.split(' at ')[0] for k in faults['kills'])))})"
    )
    if fuzz is not None:
        print(
            f"fuzzing: {fuzz['command']} ({fuzz['seconds']:.0f} s, pytest exit {fuzz['exit_code']})"
        )
    for case in faults["skipped"]:
        print(f"  skipped (needs root for a tmpfs): {case}")
    print(
        "\nruns: tests of the scenario; 2xx-5xx: answers the tests and the sidecars got (the "
        "proxy's own 502 while a scheduler was down left out); unexplained 5xx: 5xx without a "
        "reason; acknowledged: progress records a heartbeat answered 200 carried; lost: those "
        "missing from the database afterwards; stuck: jobs not done or failed at the end"
    )
    if faults["tail"]:
        print("\n" + faults["tail"])
    if args.json:
        write_json(args.json, {"faults": faults, "fuzz": fuzz})
    failed = faults["exit_code"] or (fuzz is not None and fuzz["exit_code"])
    sys.exit(1 if failed or total.get("lost") or total.get("stuck") else 0)


if __name__ == "__main__":
    main()
