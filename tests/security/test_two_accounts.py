"""Two users and a shared scheduler, each under their own real OS account.

The shared scheduler runs as its service account (``egpu-sched``); ann's and bob's Jupyter
servers run as ``egpu-ann`` and ``egpu-bob`` and start their own sidecars. Checked: neither
user reads the other's job, logs, script, inputs or secret, through their own server or at
the scheduler; neither reads the scheduler's token file or database; a log linked to the token
file gives nothing away; a discovery file another user forged gets no token. Runs as root
(it creates the accounts when they are missing); skipped otherwise, failed with ``CI=true``.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from accounts import ANN, BOB, SCHEDULER, chown, ensure_accounts, home, shared_python
from elastic_gpu_sidecar import protocol as P
from servers import (
    DaemonProcess,
    JupyterServerProcess,
    as_user,
    call,
    free_port,
    get_json,
    kill_sidecars_under,
    wait_for,
)

from jupyter_elastic_gpu.errors import ExitCode

pytestmark = pytest.mark.slow

PROBE = """
import json, os, sys
seen = {}
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
        seen[path] = "read"
    except PermissionError:
        seen[path] = "denied"
    except OSError as e:
        seen[path] = type(e).__name__
print(json.dumps(seen))
"""

LISTENER = """
import http.server, sys
log = open(sys.argv[1], "a")
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log.write(repr(self.headers.get("Authorization")) + "\\n"); log.flush()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.end_headers(); self.wfile.write(b'{"gpus": [], "jobs": []}')
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), Handler)
print("ready", flush=True)
server.serve_forever()
"""


def job_roots() -> list[Path]:
    return [home(u) / ".local/share/jupyter/elastic-gpu" for u in (ANN, BOB)]


@dataclass
class Box:
    base: Path
    python: str
    env: dict
    daemon: DaemonProcess
    tokens: dict[str, str]
    token_files: dict[str, str]
    servers: dict[str, JupyterServerProcess]

    def run_as(self, user: str, args: list[str], **env: str) -> subprocess.CompletedProcess:
        environ = {k: v for k, v in self.env.items() if not k.startswith(("ELASTIC_GPU_", "JPY"))}
        environ.update(JUPYTER_RUNTIME_DIR=str(self.base / f"{user}-no-runtime"), **env)
        return subprocess.run(
            [self.python, *args], capture_output=True, text=True, timeout=120,
            **as_user(user, environ),
        )  # fmt: skip

    def probe(self, user: str, *paths: Path) -> dict[str, str]:
        res = self.run_as(user, ["-c", PROBE, *map(str, paths)])
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def cli(self, user: str, *args: str, **env: str) -> subprocess.CompletedProcess:
        return self.run_as(user, ["-m", "jupyter_elastic_gpu.cli", *args], **env)


@pytest.fixture(scope="module")
def box():
    ensure_accounts()
    base = Path(tempfile.mkdtemp(prefix="egpu-security-"))
    os.chmod(base, 0o755)
    for path in job_roots():
        shutil.rmtree(path, ignore_errors=True)
    started: list = []
    try:
        python, env = shared_python(base, ANN)
        (base / "sched").mkdir()
        chown(base / "sched", SCHEDULER, 0o755)
        daemon = DaemonProcess(base / "sched", free_port(), user=SCHEDULER, python=python, env=env)
        daemon.state.mkdir()
        chown(daemon.state, SCHEDULER, 0o700)
        daemon.start()
        started.append(daemon)
        token_files = {u: daemon.token_file_text(u) for u in (ANN, BOB)}
        tokens = {u: text.split("token=")[1].strip() for u, text in token_files.items()}
        tokens["ops"] = daemon.add_user("ops", admin=True)
        for user, text in token_files.items():
            folder = home(user) / ".jupyter"
            folder.mkdir(exist_ok=True)
            chown(folder, user, 0o700)
            (folder / "elastic-gpu-token").write_text(text)
            chown(folder / "elastic-gpu-token", user, 0o600)
        servers = {}
        for user in (ANN, BOB):
            root = base / user
            root.mkdir()
            chown(root, user, 0o700)
            servers[user] = JupyterServerProcess(
                root,
                free_port(),
                token=f"{user}-jupyter-token",
                name=user,
                user=user,
                python=python,
                env={"JUPYTER_CONFIG_PATH": env["JUPYTER_CONFIG_PATH"]},
                config={"scheduler_url": daemon.api_url, "scheduler_token": tokens[user]},
            )
            servers[user].start()
            started.append(servers[user])
        yield Box(base, python, env, daemon, tokens, token_files, servers)
    finally:
        for proc in reversed(started):
            proc.stop()
        for path in job_roots():
            kill_sidecars_under(path)
            shutil.rmtree(path, ignore_errors=True)
        for user in (ANN, BOB):
            (home(user) / ".jupyter" / "elastic-gpu-token").unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)


def synthetic(name: str, work: float, **extra) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 1,
        "synthetic": {"work": work, "throughput": {"1": 100}, "batch": 10},
        **extra,
    }


@pytest.fixture(scope="module")
def jobs(box):
    """One finished job each (ann's with passed inputs)."""
    inputs = {"secret_x": base64.b64encode(pickle.dumps("ann's data")).decode()}
    out = {}
    for user, body in ((ANN, synthetic("ann-job", 300, inputs=inputs)), (BOB, synthetic("b", 300))):
        s = box.servers[user]
        code, job = call("POST", s.api_url + "jobs", s.token, body)
        assert code == 201, job
        out[user] = job

    def done(user):
        s = box.servers[user]
        job = get_json(s.api_url + f"jobs/{out[user]['id']}", s.token)
        return job if job["state"] == "done" else None

    for user in out:
        out[user] = wait_for(lambda u=user: done(u), 120, what=f"{user}'s job to finish")
    return out


def test_jobs_and_logs_of_another_user_stay_closed(box, jobs):
    ann_job = jobs[ANN]
    bob = box.servers[BOB]
    for route in ("", "/logs", "/events", "/progress"):
        code, answer = call("GET", bob.api_url + f"jobs/{ann_job['id']}{route}", bob.token)
        assert code == 403, (route, answer)
        code, answer = call(
            "GET", box.daemon.api_url + f"jobs/{ann_job['id']}{route}", box.tokens[BOB]
        )
        assert code == 403, (route, answer)
        assert "ann's data" not in json.dumps(answer)
    code, _ = call("POST", bob.api_url + f"jobs/{ann_job['id']}/cancel", bob.token, {})
    assert code == 403
    launches = get_json(box.daemon.api_url + "launches", box.tokens[BOB])["launches"]
    assert ann_job["id"] not in {item["job_id"] for item in launches}
    # Ann's own server reads her logs as her; the scheduler reads none, for anyone.
    ann = box.servers[ANN]
    logs = get_json(ann.api_url + f"jobs/{ann_job['id']}/logs", ann.token)
    assert "generation 1" in logs["sidecar"]
    for who in (ANN, "ops"):
        code, answer = call(
            "GET", box.daemon.api_url + f"jobs/{ann_job['id']}/logs", box.tokens[who]
        )
        assert (code, answer["reason"]) == (409, "read-by-owner"), answer
    # From a terminal, as ann, through the discovered scheduler: read as her, from her dir.
    res = box.cli(
        ANN,
        "logs",
        ann_job["id"],
        "--sidecar",
        ELASTIC_GPU_DAEMON_DIR=str(box.daemon.discovery_dir),
    )
    assert res.returncode == 0 and "generation 1" in res.stdout, res.stderr
    res = box.cli(BOB, "logs", ann_job["id"], ELASTIC_GPU_DAEMON_DIR=str(box.daemon.discovery_dir))
    assert res.returncode == ExitCode.FORBIDDEN and f"belongs to {ANN}" in res.stderr
    # An admin's token lends no file rights: run as bob, it gets the job, not its logs.
    admin = {"ELASTIC_GPU_URL": box.daemon.api_url, "ELASTIC_GPU_TOKEN": box.tokens["ops"]}
    res = box.cli(BOB, "logs", ann_job["id"], "--sidecar", **admin)
    assert res.returncode == 1 and "Permission denied" in res.stderr, res.stderr
    assert "generation 1" not in res.stdout


def test_files_of_a_job_and_of_the_scheduler_are_closed(box, jobs):
    job_dir = Path(jobs[ANN]["job_dir"])
    assert job_dir.is_relative_to(home(ANN))
    assert (job_dir / P.INPUTS).exists()
    owners = {p.stat().st_uid for p in (job_dir, job_dir / P.INPUTS, job_dir / P.TRAINER_LOG)}
    assert owners == {pwd.getpwnam(ANN).pw_uid}
    ann_files = [job_dir, job_dir / P.INPUTS, job_dir / P.TRAINER_LOG, job_dir / P.STATUS]
    assert set(box.probe(BOB, *ann_files).values()) == {"denied"}
    assert set(box.probe(ANN, *ann_files).values()) == {"read"}
    state = [box.daemon.state / "tokens.json", box.daemon.state / "scheduler.sqlite"]
    for user in (ANN, BOB):
        assert set(box.probe(user, *state).values()) == {"denied"}, user
        assert set(box.probe(user, home(ANN if user == BOB else BOB) / ".jupyter").values()) == {
            "denied"
        }


def test_the_secret_of_a_running_sidecar_stays_with_its_user(box):
    ann = box.servers[ANN]
    code, job = call("POST", ann.api_url + "jobs", ann.token, synthetic("long", 1e9))
    assert code == 201

    def sidecar():
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    argv = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"elastic_gpu_sidecar" in argv and job["job_dir"].encode() in argv:
                    return entry
        return None

    try:
        proc = wait_for(sidecar, 60, what="ann's sidecar")
        assert proc.stat().st_uid == pwd.getpwnam(ANN).pw_uid
        assert box.probe(BOB, proc / "environ") == {str(proc / "environ"): "denied"}
    finally:
        call("POST", ann.api_url + f"jobs/{job['id']}/cancel", ann.token, {})


def test_a_log_linked_to_the_token_file_gives_nothing_away(box, jobs):
    ann_job = jobs[ANN]
    log = Path(ann_job["job_dir"]) / P.TRAINER_LOG
    tokens_file = box.daemon.state / "tokens.json"
    res = box.run_as(
        ANN,
        [
            "-c",
            f"import os; os.unlink({str(log)!r}); os.symlink({str(tokens_file)!r}, {str(log)!r})",
        ],
    )
    assert res.returncode == 0, res.stderr
    ann = box.servers[ANN]
    answers = [
        call("GET", ann.api_url + f"jobs/{ann_job['id']}/logs", ann.token),
        call("GET", box.daemon.api_url + f"jobs/{ann_job['id']}/logs", box.tokens[ANN]),
        call("GET", box.daemon.api_url + f"jobs/{ann_job['id']}/logs", box.tokens["ops"]),
    ]
    assert [code for code, _ in answers] == [200, 409, 409]
    for _, answer in answers:
        assert not any(t in json.dumps(answer) for t in box.tokens.values())
    assert "trainer.log is a symbolic link" in answers[0][1]["trainer"]


def test_a_forged_discovery_file_gets_no_token(box):
    # Bob cannot write where the scheduler announces itself ...
    res = box.run_as(BOB, ["-c", f"open({str(box.daemon.discovery_dir / 'x')!r}, 'w')"])
    assert res.returncode != 0 and "PermissionError" in res.stderr
    # ... so he announces his own listener, from a folder of his, with a live pid.
    folder = box.base / "bob-announces"
    folder.mkdir()
    chown(folder, BOB, 0o755)
    port, record = free_port(), folder / "seen.log"
    listener = subprocess.Popen(
        [box.python, "-c", LISTENER, str(record), str(port)],
        stdout=subprocess.PIPE,
        text=True,
        **as_user(BOB, dict(box.env)),
    )
    try:
        assert listener.stdout.readline().strip() == "ready"
        doc = json.dumps({"url": f"http://127.0.0.1:{port}/elastic-gpu/api/", "pid": listener.pid})
        path = folder / "jupyter-elastic-gpu-scheduler.json"
        res = box.run_as(BOB, ["-c", f"open({str(path)!r}, 'w').write({doc!r})"])
        assert res.returncode == 0, res.stderr
        res = box.cli(ANN, "status", ELASTIC_GPU_DAEMON_DIR=str(folder))
        assert res.returncode == ExitCode.UNREACHABLE, res.stdout + res.stderr
        assert "so it was not sent" in res.stderr and "ELASTIC_GPU_URL=" in res.stderr
        # Even her environment's token is not sent to a discovered URL.
        res = box.cli(
            ANN, "status", ELASTIC_GPU_DAEMON_DIR=str(folder), ELASTIC_GPU_TOKEN=box.tokens[ANN]
        )
        assert res.returncode == ExitCode.UNREACHABLE
        assert not record.exists() or record.read_text() == "", "bob's listener was called"
        # The real announcement, with her token file, works.
        res = box.cli(ANN, "status", ELASTIC_GPU_DAEMON_DIR=str(box.daemon.discovery_dir))
        assert res.returncode == 0, res.stderr
    finally:
        listener.kill()
        listener.wait()
