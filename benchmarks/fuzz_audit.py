"""The adversarial suite's figures: hostile requests sent to real servers, and what came back.

Runs the fuzzing of tests/adversarial (every route of the embedded server, the sidecar
heartbeat with a valid secret and hostile contents, the shared scheduler's token routes) with
more examples than the test suite does, and prints per route: the cases sent, the answers by
status class, the rejected requests that changed the server's state, and the answers that
broke another rule (not strict JSON, no error message, not valid under openapi.yaml).

    python benchmarks/fuzz_audit.py [--examples 2000] [--json out.json]

``run_fuzz_audit()`` returns the same figures as a dict, for a script that prints several
audits together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from jupyter_elastic_gpu.options import Parser

REPO = Path(__file__).resolve().parents[1]
#: The fuzz tests, each run with ``examples`` examples (the suite's own run uses fewer).
FUZZ_TESTS = (
    "tests/adversarial/test_fuzz_routes.py",
    "tests/adversarial/test_fuzz_heartbeat.py",
    "tests/adversarial/test_fuzz_daemon.py",
)
COLUMNS = ("sent", "2xx", "3xx", "4xx", "5xx", "changed", "invalid")


def run_fuzz_audit(examples: int = 2000, timeout: float = 3600.0) -> dict:
    """Fuzz the API of real servers with ``examples`` hypothesis examples per fuzz test
    (derandomized: the same cases on every run of the same code), in a pytest subprocess.

    Returns ``{"command", "examples", "seconds", "exit_code", "groups", "totals",
    "problems"}``: ``groups`` maps each fuzz test ("routes (embedded server)", "heartbeat
    (embedded server)", "routes (shared scheduler)") to ``{route: counts}``, and ``totals``
    sums the counts over everything. Counts are ``sent``, ``2xx``..``5xx`` (answers by
    status class), ``changed`` (rejected requests after which the state differed: the job
    records, the database rows, the event log, the state version) and ``invalid`` (answers
    that broke another rule). ``problems`` lists the first broken rules, word for word; a
    broken rule is counted, not raised, so every case is sent. ``exit_code`` is pytest's
    (non-zero also when a test's own checks failed).
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "fuzz.jsonl"
        env = dict(
            os.environ,
            ELASTIC_GPU_FUZZ_EXAMPLES=str(examples),
            ELASTIC_GPU_FUZZ_REPORT=str(report),
        )
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:logging"]
        started = time.monotonic()
        done = subprocess.run(
            [*args, *FUZZ_TESTS], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
        )
        seconds = time.monotonic() - started
        lines = report.read_text().splitlines() if report.exists() else []
    groups: dict[str, dict[str, dict[str, int]]] = {}
    totals: Counter = Counter()
    problems: list[str] = []
    for line in lines:
        doc = json.loads(line)
        routes = groups.setdefault(doc["test"], {})
        for route, counts in doc["routes"].items():
            merged = Counter(routes.get(route, {})) + Counter(counts)
            routes[route] = {c: merged.get(c, 0) for c in COLUMNS}
            totals.update(counts)
        problems += doc["problems"]
    if done.returncode != 0:
        problems.append("pytest: " + (done.stdout + done.stderr)[-2000:])
    return {
        "command": f"ELASTIC_GPU_FUZZ_EXAMPLES={examples} python -m pytest " + " ".join(FUZZ_TESTS),
        "examples": examples,
        "seconds": round(seconds, 1),
        "exit_code": done.returncode,
        "groups": groups,
        "totals": {c: totals.get(c, 0) for c in COLUMNS},
        "problems": problems,
    }


def table(figures: dict) -> str:
    """The figures as a text table, one row per route, a total row per group."""
    head = ["route", *COLUMNS]
    rows = []
    for group, routes in figures["groups"].items():
        rows.append([f"[{group}]", *[""] * len(COLUMNS)])
        for route, counts in sorted(routes.items(), key=lambda kv: kv[0].split(" ", 1)[::-1]):
            rows.append([route, *(str(counts[c]) for c in COLUMNS)])
    rows.append(["total", *(str(figures["totals"][c]) for c in COLUMNS)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(row: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        )

    return "\n".join([fmt(head), *(fmt(r) for r in rows)])


def main() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from _common import command_line, output_file, whole, write_json

    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=whole(), default=2000, help="examples per fuzz test")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    output_file(parser, args.json, "--json")

    figures = run_fuzz_audit(args.examples)
    print(f"$ {command_line()}")
    print(
        f"{args.examples} examples per fuzz test, {figures['totals']['sent']} requests in "
        f"{figures['seconds']:.0f} s (pytest exit {figures['exit_code']})\n"
    )
    print(table(figures))
    print(
        "\nsent: requests; 2xx-5xx: answers by status class; changed: rejected requests "
        "that changed the state; invalid: answers that broke another rule (not strict JSON, "
        "no message on an error, not valid under openapi.yaml for their status)"
    )
    for problem in figures["problems"][:20]:
        print("  !", problem[:400])
    if args.json:
        write_json(args.json, figures)
    sys.exit(1 if figures["exit_code"] or figures["problems"] else 0)


if __name__ == "__main__":
    main()
