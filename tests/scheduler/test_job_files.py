"""A job's files are read and written by the job owner's side, never through a link, never in
a folder another user controls; the shared scheduler opens none of them.

The attacks: a user links their ``trainer.log`` to the scheduler's token file and reads it
through ``GET jobs/ID/logs``; a user pre-creates another user's job root (or job dir) and
swaps their script or inputs. Real files, real servers; the tests that hand a folder to
another uid need root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from elastic_gpu_sidecar import protocol as P
from servers import DaemonProcess, call, free_port, get_json, wait_for

from jupyter_elastic_gpu.errors import Conflict, ExitCode
from jupyter_elastic_gpu.scheduler.storage import jobdirs, ownfiles

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
OTHER = 54321  # a uid that is not this process's


def synthetic(work=2_000):
    return {
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 1,
        "synthetic": {"work": work, "throughput": {"1": 100}, "batch": 10},
    }


# -- reading -------------------------------------------------------------------------------------


def test_a_log_linked_elsewhere_reads_as_a_message_not_its_target(tmp_path):
    secret = tmp_path / "tokens.json"
    secret.write_text('{"the-admin-token": {"user": "ops", "admin": true}}')
    job = tmp_path / "job"
    job.mkdir()
    (job / P.TRAINER_LOG).symlink_to(secret)
    os.mkfifo(job / P.SIDECAR_LOG)  # would block a plain open()
    logs = jobdirs.logs(str(job), 200)
    assert "the-admin-token" not in json.dumps(logs)
    assert logs["trainer"] == (
        "[trainer.log is a symbolic link: not read; logs are read only from regular files in "
        "the job dir]"
    )
    assert logs["sidecar"].startswith("[sidecar.log is not a regular file: not read")
    (job / P.SIDECAR_LOG).unlink()
    os.link(secret, job / P.SIDECAR_LOG)
    assert "has other hard links" in jobdirs.logs(str(job), 200)["sidecar"]
    # The job dir itself linked to another folder is not read either.
    other = tmp_path / "other"
    other.mkdir()
    (other / P.TRAINER_LOG).write_text("someone else's\n")
    (tmp_path / "linked").symlink_to(other)
    assert "someone else's" not in jobdirs.logs(str(tmp_path / "linked"), 200)["trainer"]


def test_a_linked_status_or_model_is_not_taken(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    real = tmp_path / "status.json"
    real.write_text(json.dumps({"state": "done", "exit_code": 0}))
    (job / P.STATUS).symlink_to(real)
    assert jobdirs.final_report(str(job)) is None
    (job / P.MODEL).symlink_to(real)
    assert jobdirs.saved_model(str(job)) is None
    (job / P.STATUS).unlink()
    (job / P.STATUS).write_text(real.read_text())
    assert jobdirs.final_report(str(job)).exit_code == 0
    (job / P.MODEL).unlink()
    (job / P.MODEL).write_bytes(b"model")
    assert jobdirs.saved_model(str(job)) == str(job / P.MODEL)


def test_each_frameworks_model_is_found_a_linked_folder_is_not(tmp_path):
    """A Lightning job leaves a checkpoint file, a Hugging Face job a folder."""
    job = tmp_path / "job"
    job.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (job / P.MODEL_DIR).symlink_to(tmp_path / "elsewhere")
    assert jobdirs.saved_model(str(job)) is None
    (job / P.MODEL_DIR).unlink()
    (job / P.MODEL_DIR).mkdir()
    assert jobdirs.saved_model(str(job)) == str(job / P.MODEL_DIR)
    (job / P.MODEL_CKPT).write_bytes(b"ckpt")
    assert jobdirs.saved_model(str(job)) == str(job / P.MODEL_CKPT)


async def test_a_linked_log_through_the_embedded_scheduler(jp_fetch, tmp_path):
    r = await jp_fetch("elastic-gpu", "api", "jobs", method="POST", body=json.dumps(synthetic()))
    job = json.loads(r.body)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the API")
    Path(job["job_dir"]).mkdir(parents=True, exist_ok=True)
    log = Path(job["job_dir"]) / P.TRAINER_LOG
    log.unlink(missing_ok=True)
    log.symlink_to(secret)
    r = await jp_fetch("elastic-gpu", "api", "jobs", job["id"], "logs")
    assert "not for the API" not in r.body.decode()
    assert "trainer.log is a symbolic link" in json.loads(r.body)["trainer"]


# -- the shared scheduler reads no job file --------------------------------------------------------


@pytest.fixture
def daemon(tmp_path):
    d = DaemonProcess(tmp_path, free_port(), ["--job-root", str(tmp_path / "jobs" / "{user}")])
    d.state.mkdir(parents=True)
    tokens = {
        "alice": d.add_user("alice"),
        "bob": d.add_user("bob"),
        "ops": d.add_user("ops", True),
    }
    d.start()
    yield d, tokens
    d.stop()


def test_logs_linked_to_the_token_file_leak_nothing(daemon, server_process, tmp_path):
    d, tokens = daemon
    alice = server_process(
        port=free_port(),
        name="alice",
        config={"scheduler_url": d.api_url, "scheduler_token": tokens["alice"]},
    )
    code, job = call("POST", alice.api_url + "jobs", alice.token, synthetic())
    assert code == 201, job

    def done():
        j = get_json(alice.api_url + f"jobs/{job['id']}", alice.token)
        return j if j["state"] == "done" else None

    wait_for(done, 90, what="alice's job to finish")
    # Her own server reads her logs, as her.
    logs = get_json(alice.api_url + f"jobs/{job['id']}/logs", alice.token)
    assert "generation 1" in logs["sidecar"]
    # The shared scheduler reads none, for her, for an admin, or for anyone else.
    for who, status in (("alice", 409), ("ops", 409), ("bob", 403)):
        code, answer = call("GET", d.api_url + f"jobs/{job['id']}/logs", tokens[who])
        assert code == status, (who, answer)
    assert answer["reason"] == "forbidden"
    code, answer = call("GET", d.api_url + f"jobs/{job['id']}/logs", tokens["alice"])
    assert answer["reason"] == "read-by-owner"
    assert "through alice's own Jupyter server" in answer["message"]
    # The attack: her log linked to the scheduler's token file.
    log = Path(job["job_dir"]) / P.TRAINER_LOG
    log.unlink()
    log.symlink_to(d.state / "tokens.json")
    for url, token in (
        (alice.api_url, alice.token),
        (d.api_url, tokens["alice"]),
        (d.api_url, tokens["ops"]),
    ):
        code, answer = call("GET", url + f"jobs/{job['id']}/logs", token)
        assert code in (200, 409), answer
        assert not any(t in json.dumps(answer) for t in tokens.values())
    logs = get_json(alice.api_url + f"jobs/{job['id']}/logs", alice.token)
    assert "trainer.log is a symbolic link" in logs["trainer"]


def test_the_cli_reads_logs_itself_from_a_discovered_scheduler(daemon, tmp_path):
    """`jupyter elastic-gpu logs` found the shared scheduler: it runs as the job's owner, so it
    reads the job dir the scheduler names (which it asked as that user)."""
    d, tokens = daemon
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "elastic-gpu-token").write_text(d.token_file_text("carol"))
    code, job = call("POST", d.api_url + "jobs", tokens["alice"], synthetic())
    assert code == 201
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ELASTIC_GPU_", "JPY"))}
    env.update(
        HOME=str(home),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "no-runtime"),
        ELASTIC_GPU_DAEMON_DIR=str(d.discovery_dir),
    )
    token = (home / ".jupyter" / "elastic-gpu-token").read_text().split("token=")[1].strip()
    code, mine = call("POST", d.api_url + "jobs", token, synthetic())
    assert code == 201
    os.makedirs(mine["job_dir"], exist_ok=True)
    Path(mine["job_dir"], P.TRAINER_LOG).write_text("line one\nline two\n")
    cli = [sys.executable, "-m", "jupyter_elastic_gpu.cli", "logs"]
    res = subprocess.run([*cli, mine["id"]], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "line one\nline two\n"
    res = subprocess.run([*cli, job["id"]], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == ExitCode.FORBIDDEN and "belongs to alice" in res.stderr


# -- writing ---------------------------------------------------------------------------------------


def test_a_new_jobs_dir_is_created_fresh(tmp_path):
    job = tmp_path / "jobs" / "j-1"
    jobdirs.write_inputs(str(job), {"x": "AAAA"})
    assert json.loads((job / P.INPUTS).read_text()) == {"x": "AAAA"}
    assert oct(job.stat().st_mode & 0o777) == "0o700"
    assert oct((job / P.INPUTS).stat().st_mode & 0o777) == "0o600"
    with pytest.raises(Conflict, match="exists already: a new job's directory is created"):
        jobdirs.write_inputs(str(job), {"x": "BBBB"})
    assert json.loads((job / P.INPUTS).read_text()) == {"x": "AAAA"}


def test_a_link_planted_under_a_files_name_is_replaced_not_followed(tmp_path):
    job = tmp_path / "job"
    job.mkdir(mode=0o700)
    victim = tmp_path / "victim.py"
    victim.write_text("untouched")
    (job / P.SCRIPT).symlink_to(victim)
    jobdirs.write_script(str(job), "print('mine')")
    assert victim.read_text() == "untouched"
    assert not (job / P.SCRIPT).is_symlink() and (job / P.SCRIPT).read_text() == "print('mine')"
    (job / P.SIDECAR_OUT).symlink_to(victim)
    with ownfiles.folder(job) as fd, pytest.raises(ownfiles.UnsafePath, match="symbolic link"):
        ownfiles.open_append(fd, P.SIDECAR_OUT)


def test_a_folder_others_may_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(Conflict, match=f"{shared} is writable by other users: run `chmod go-w"):
        jobdirs.write_script(str(shared / "ann" / "j-1"), "x")
    os.chmod(shared, 0o1777)  # sticky, like /tmp: others cannot replace what is ours in it
    jobdirs.write_script(str(shared / "ann" / "j-1"), "x")
    assert (shared / "ann" / "j-1" / P.SCRIPT).read_text() == "x"


@needs_root
def test_a_job_root_another_user_prepared_is_refused(tmp_path):
    root = jobdirs.job_root(f"~nosuchuser-{os.getpid()}/jobs/{{user}}", "ann")
    assert root.name == "jobs" and root.parent.name == "jupyter-elastic-gpu-ann"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, OTHER, OTHER)
    for where in (theirs / "j-1", theirs / "deeper" / "j-1"):
        with pytest.raises(Conflict, match=f"{theirs} belongs to uid {OTHER}, not to"):
            jobdirs.write_inputs(str(where), {"x": "A"})
        assert not where.exists()
    # A link to it, owned by the other user, is not followed either.
    link = tmp_path / "link"
    link.symlink_to(theirs)
    os.lchown(link, OTHER, OTHER)
    with pytest.raises(Conflict, match="symbolic link owned by uid"):
        jobdirs.write_script(str(link / "j-2"), "x")


@needs_root
async def test_submitting_into_a_job_root_another_user_owns_is_a_409(jp_fetch, tmp_path):
    import getpass

    root = tmp_path / "jobs" / jobdirs.safe_name(getpass.getuser())
    root.mkdir(parents=True)
    os.chown(root, OTHER, OTHER)
    body = {**synthetic(), "inputs": {"x": "AAAA"}}
    from tornado.httpclient import HTTPClientError

    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("elastic-gpu", "api", "jobs", method="POST", body=json.dumps(body))
    assert info.value.code == 409
    answer = json.loads(info.value.response.body)
    assert f"belongs to uid {OTHER}" in answer["message"] and answer["reason"] == "conflict"
    r = await jp_fetch("elastic-gpu", "api", "jobs")
    assert json.loads(r.body)["jobs"] == []
