"""The JupyterLab sidebar under load: time per update in the browser, and bytes per update over
the push channel against a full poll of the same data.

A real Jupyter server with the extension and JupyterLab (a subprocess) has ``--gpus``
simulated GPUs and ``--jobs`` synthetic jobs, each of a fixed size (1, 2, 4 or 8 GPUs): the
first fill every GPU, the rest wait in the queue. As in api_load.py, the launcher is real and
only the sidecar's Python is ``_launch_recorder.sh``, a stand-in that stays alive; this script
heartbeats once for each job it launched, so that the job runs and holds its GPUs. Nothing
else changes the state while updates are measured (no sidecar reports on its own, the
scheduler's tick is rare).

JupyterLab is open in Debian's Chromium (Playwright) with the panel shown. Then ``--updates``
changes, one at a time, in turn: the progress of one running job (a heartbeat with a new
record), a job submitted (of each size in turn), a queued job cancelled. For each:

* render ms: ``data-render-ms`` of the longest render of the panel after the change;
* first ms: from sending the request to the panel's ``data-version`` reaching the first state
  version after it (one wall clock, this script's and the browser's, on one machine): the
  changed job itself shows;
* settled ms: the same, to the version once nothing more changed for ``QUIET_S`` (the
  decision after a submission, the queue's new order and estimated starts come as versions
  of their own): the whole panel is up to date. A change the panel has not shown ``--wait``
  seconds after that is counted apart, as not shown;
* push bytes: payload bytes of the websocket frames the page received from the change until
  the next one (Playwright's ``framereceived``);
* full poll bytes: the bodies of ``GET gpus`` + ``GET queue`` + ``GET jobs`` right after the
  change, what a panel that polls downloads per refresh (body bytes on both sides: no
  headers, no compression).

The server sends at most 4 panel messages a second (docs/api.md), which bounds how soon a
change can show.

    python benchmarks/panel_update.py [--gpus 64] [--jobs 500] [--updates 60]
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from _common import command_line, positive, whole
from _servers import JupyterServer, finish
from api_load import Launch, SyntheticSidecar, quantile
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright
from tqdm import tqdm

from jupyter_elastic_gpu.options import Parser

HERE = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Debian's Chromium as Playwright can drive it here (no browser download, no sandbox).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
#: The sidebar's DOM contract (docs/sidebar.md).
PANEL_ID = "elastic-gpu-queue"
SHOW_COMMAND = "elastic-gpu:show-queue"
SIZES = (1, 2, 4, 8)
#: samples/s of every job at each size: known to the scheduler from the submission.
PROFILE = {"1": 1000, "2": 1900, "4": 3600, "8": 7000}
#: Running jobs are short and waiting ones long, so that no change reorders who runs.
RUNNING_WORK, WAITING_WORK = 1e6, 1e10
KINDS = ("progress", "submit", "cancel")
#: Seconds without a new state version after which a change counts as settled.
QUIET_S = 1.0
#: Records every render of the panel: its version, its duration, when (epoch ms).
WATCH_RENDERS = """
window.__panelRenders = [];
document.addEventListener('DOMContentLoaded', () => {
  new MutationObserver(records => {
    const t = performance.timeOrigin + performance.now();
    for (const r of records) {
      window.__panelRenders.push({
        t, version: Number(r.target.getAttribute('data-version')),
        ms: Number(r.target.getAttribute('data-render-ms'))
      });
    }
  }).observe(document.body, {attributes: true, subtree: true, attributeFilter: ['data-version']});
});
"""


@dataclass
class Update:
    kind: str
    sent_ms: float  # epoch ms when the request was sent
    first_ms: float | None  # epoch ms of the first render at the first version after it
    settled_ms: float | None  # ... at the version once the change's consequences were made
    poll_bytes: int
    render_ms: float = 0.0
    push_bytes: int = 0

    def after(self, shown_ms: float | None) -> float | None:
        return None if shown_ms is None else shown_ms - self.sent_ms


@dataclass
class Frames:
    """Payload bytes of every websocket frame the page received from the API, by the update
    under way when it came (-1: while the panel opened)."""

    current: int = -1
    sizes: list[tuple[int, int]] = field(default_factory=list)

    def watch(self, ws) -> None:
        if "/elastic-gpu/api/" in ws.url:
            ws.on("framereceived", self.add)

    def add(self, payload: str | bytes) -> None:
        self.sizes.append(
            (self.current, len(payload.encode() if isinstance(payload, str) else payload))
        )

    def of(self, update: int) -> int:
        return sum(n for i, n in self.sizes if i == update)


def submission(name: str, size: int, work: float) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": size,
        "max_gpus": size,
        "synthetic": {"work": work, "throughput": PROFILE},
    }


def sizes_filling(gpus: int, rng: random.Random) -> list[int]:
    out: list[int] = []
    while sum(out) < gpus:
        out.append(min(rng.choice(SIZES), gpus - sum(out)))
    return out


def version(server: JupyterServer) -> int:
    return server.get("updates?since=-1&timeout=0")["version"]


def poll_bytes(server: JupyterServer) -> int:
    """Body bytes of one full poll: GET gpus + GET queue + GET jobs."""
    total = 0
    for route in ("gpus", "queue", "jobs"):
        request = urllib.request.Request(server.api_url + route)
        request.add_header("Authorization", f"token {server.token}")
        with urllib.request.urlopen(request, timeout=60) as r:
            total += len(r.read())
    return total


def heartbeat(sidecar: SyntheticSidecar, record: dict) -> None:
    request = urllib.request.Request(
        sidecar.launch.url,
        data=json.dumps(sidecar.body("running", record)).encode(),
        method="POST",
    )
    request.add_header("Authorization", f"Bearer {sidecar.launch.secret}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as r:
        grant = json.loads(r.read())
    if grant.get("action") != "run":
        raise SystemExit(f"{sidecar.launch.job_id} was told {grant} instead of running on")
    sidecar.acked.append(record)


def setup(args, server: JupyterServer, launches_dir: Path, sleepers: list[int]):
    """Submit the jobs, run those that were launched; (sidecars, ids of the waiting jobs)."""
    rng = random.Random(args.seed)
    running = sizes_filling(args.gpus, rng)
    waiting = [rng.choice(SIZES) for _ in range(max(args.jobs - len(running), 0))]
    ids: list[str] = []
    plan = [(s, RUNNING_WORK) for s in running] + [(s, WAITING_WORK) for s in waiting]
    for i, (size, work) in enumerate(tqdm(plan, desc="submitting", unit="job", leave=False)):
        code, job = server.call("POST", "jobs", submission(f"job-{i:03d}", size, work))
        if code != 201:
            raise SystemExit(f"submit {i} answered {code}: {job}")
        ids.append(job["id"])
    deadline = time.monotonic() + 120
    while len(list(launches_dir.glob("*.launch"))) < len(running):
        if time.monotonic() > deadline:
            raise SystemExit(f"not every running job was launched in 120 s: {server.log_tail()}")
        time.sleep(0.2)
    launches = [Launch.read(p) for p in sorted(launches_dir.glob("*.launch"))]
    sleepers.extend(launch.pid for launch in launches)
    sidecars = [SyntheticSidecar(launch, speed=100.0) for launch in launches]
    for sc in sidecars:
        heartbeat(sc, sc.record(first=True, pid=sc.launch.pid, resumed_from=0))
    launched = {sc.launch.job_id for sc in sidecars}
    return sidecars, [i for i in ids if i not in launched]


def open_panel(server: JupyterServer, page, frames: Frames) -> tuple[float, int, int]:
    """Open JupyterLab and the panel; (ms to the first render of data, its version, bytes
    pushed until then)."""
    page.on("websocket", frames.watch)
    page.goto(f"http://127.0.0.1:{server.port}/lab?token={server.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=120_000)
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")
    now = version(server)
    t0 = time.time() * 1000
    page.evaluate(f"() => window.jupyterapp.commands.execute('{SHOW_COMMAND}')")
    first = page.wait_for_function(
        "v => window.__panelRenders.find(r => r.version >= v)", arg=now, timeout=120_000
    ).json_value()
    return first["t"] - t0, first["version"], frames.of(-1)


def change(kind: str, server: JupyterServer, sidecars, waiting: list[str], i: int) -> None:
    if kind == "progress":
        sc = sidecars[i % len(sidecars)]
        heartbeat(sc, sc.record())
    elif kind == "submit":
        size = SIZES[(i // len(KINDS)) % len(SIZES)]
        code, job = server.call("POST", "jobs", submission(f"new-{i:03d}", size, WAITING_WORK))
        if code != 201:
            raise SystemExit(f"submit answered {code}: {job}")
        waiting.append(job["id"])
    else:
        job_id = waiting.pop(0)
        code, job = server.call("POST", f"jobs/{job_id}/cancel")
        if code != 202:
            raise SystemExit(f"cancel answered {code}: {job}")


def settled(server: JupyterServer, version: int) -> int:
    """The state version once nothing has changed for ``QUIET_S``: a change's consequences
    (the decision after a submission, the new estimates) come as versions of their own."""
    while True:
        newer = server.get(f"updates?since={version}&timeout={QUIET_S}")["version"]
        if newer == version:
            return version
        version = newer


def shown(page, version: int, wait_s: float) -> float | None:
    """Epoch ms of the panel's first render at ``version`` or later; None if none within
    ``wait_s`` seconds."""
    try:
        return page.wait_for_function(
            "v => { const r = window.__panelRenders.find(r => r.version >= v);"
            " return r ? r.t : null; }",
            arg=version,
            timeout=wait_s * 1000,
        ).json_value()
    except PlaywrightError:
        return None


def measure(args, server: JupyterServer, page, sidecars, waiting, frames: Frames) -> list[Update]:
    updates: list[Update] = []
    for i in tqdm(range(args.updates), desc="updates", unit="update", leave=False):
        kind = KINDS[i % len(KINDS)]
        before = version(server)
        page.evaluate("() => 0")  # hand over the frames that came so far, then count anew
        frames.current = i
        sent = time.time() * 1000
        change(kind, server, sidecars, waiting, i)
        first = server.get(f"updates?since={before}&timeout=30")["version"]
        if first <= before:
            raise SystemExit(f"a {kind} did not change the state version ({before})")
        last = settled(server, first)
        first_ms = shown(page, first, args.wait)
        last_ms = shown(page, last, args.wait) if first_ms is not None else None
        updates.append(Update(kind, sent, first_ms, last_ms, poll_bytes(server)))
    page.evaluate("() => 0")
    renders = page.evaluate("() => window.__panelRenders")
    ends = [u.sent_ms for u in updates[1:]] + [time.time() * 1000]
    for i, (u, end) in enumerate(zip(updates, ends)):
        u.render_ms = max((r["ms"] for r in renders if u.sent_ms <= r["t"] < end), default=0.0)
        u.push_bytes = frames.of(i)
    return updates


def p50_p95(values: list[float]) -> str:
    if not values:
        return f"{'-':>17}"
    return f"{quantile(values, 0.5):>8.1f}/{quantile(values, 0.95):<8.1f}"


def report(args, updates: list[Update], first: tuple[float, int, int], snapshot_poll: int, info):
    chromium, running, http_calls = info
    print(
        f"{args.gpus} simulated GPUs, {args.jobs} synthetic jobs ({running} running, "
        f"{args.jobs - running} queued), JupyterLab in {chromium} with the panel open, "
        f"{len(updates)} updates, one at a time, on {os.cpu_count()} CPU cores"
    )
    first_ms, first_version, snapshot_bytes = first
    print(
        f"panel opened: first render (version {first_version}) {first_ms:.0f} ms after the "
        f"command; {snapshot_bytes:,} bytes pushed vs {snapshot_poll:,} bytes for a full poll\n"
    )
    header = (
        f"{'update':<10}{'n':>4}  {'render ms p50/p95':>17}  {'first ms p50/p95':>17}"
        f"  {'settled ms p50/p95':>18}  {'not shown':>9}  {'push bytes p50/p95':>18}"
        f"  {'poll bytes p50':>14}  {'push/poll':>9}"
    )
    print(header)
    print("-" * len(header))
    for kind in (*KINDS, "all"):
        rows = [u for u in updates if kind in (u.kind, "all")]
        if not rows:
            continue
        push = [float(u.push_bytes) for u in rows]
        poll = [float(u.poll_bytes) for u in rows]
        first = [u.after(u.first_ms) for u in rows if u.first_ms is not None]
        done = [u.after(u.settled_ms) for u in rows if u.settled_ms is not None]
        ratio = statistics.median(push) / statistics.median(poll)
        print(
            f"{kind:<10}{len(rows):>4}  {p50_p95([u.render_ms for u in rows])}  "
            f"{p50_p95(first)}  {p50_p95(done):>18}  {len(rows) - len(done):>9}"
            f"  {p50_p95(push):>18}  {statistics.median(poll):>14,.0f}  {ratio:>9.4f}"
        )
    missed = sum(u.settled_ms is None for u in updates)
    total_push = sum(u.push_bytes for u in updates)
    total_poll = sum(u.poll_bytes for u in updates)
    print(
        f"\nin all: {total_push:,} bytes pushed vs {total_poll:,} bytes for one full poll per "
        f"update ({total_poll / max(total_push, 1):.1f}x less pushed); changes the panel had not "
        f"shown {args.wait:g} s later: {missed}; HTTP requests the page sent to the API "
        f"meanwhile: {http_calls}"
    )


def main() -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=whole(), default=64, help="simulated GPUs")
    ap.add_argument("--jobs", type=whole(), default=500, help="synthetic jobs (most wait)")
    ap.add_argument("--updates", type=whole(), default=60, help="changes measured, one at a time")
    ap.add_argument("--seed", type=int, default=1, help="seed of the job sizes")
    ap.add_argument(
        "--wait", type=positive, default=10.0, help="seconds a change may take to show in the panel"
    )
    ap.add_argument("--keep", action="store_true", help="keep the server's folder afterwards")
    args = ap.parse_args()
    print(f"$ {command_line()}\n")

    if not Path(CHROMIUM).exists():
        sys.exit("benchmark: Debian's chromium is not installed (apt-get install chromium)")

    root = Path(tempfile.mkdtemp(prefix="elastic-gpu-panel-"))
    launches_dir = root / "launches"
    launches_dir.mkdir()
    fake = root / "sidecar-python"
    shutil.copy(HERE / "_launch_recorder.sh", fake)
    fake.chmod(0o755)
    settings = root / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    server = JupyterServer(
        root,
        config={
            "simulated_gpus": args.gpus,
            "LocalLauncher.python": str(fake),
            "SchedulerService.heartbeat_timeout": 3600.0,
            "SchedulerService.tick_interval": 3600.0,
            "LabApp.expose_app_in_browser": True,
        },
        env={
            "ELASTIC_GPU_BENCH_LAUNCHES": str(launches_dir),
            "ELASTIC_GPU_BENCH_HOLD_S": "3600",
            "JUPYTERLAB_SETTINGS_DIR": str(root / "lab-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(root / "lab-workspaces"),
        },
    )
    sleepers: list[int] = []
    try:
        server.start()
        sidecars, waiting = setup(args, server, launches_dir, sleepers)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.add_init_script(WATCH_RENDERS)
            frames = Frames()
            first = open_panel(server, page, frames)
            snapshot_poll = poll_bytes(server)
            api_calls: list[str] = []
            page.on(
                "request",
                lambda r: api_calls.append(r.url) if "/elastic-gpu/api/" in r.url else None,
            )
            updates = measure(args, server, page, sidecars, waiting, frames)
            info = (f"Chromium {browser.version}", len(sidecars), len(api_calls))
            browser.close()
        report(args, updates, first, snapshot_poll, info)
        return 0
    finally:
        finish(server, sleepers, root, args.keep)


if __name__ == "__main__":
    sys.exit(main())
