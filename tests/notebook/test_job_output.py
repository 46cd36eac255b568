"""A job's output as a kernel sends it and as a terminal prints it: one display of the job MIME
type (the lab extension's card) with the text view beside it and nothing else, whose text
``wait()`` rewrites once at the end; in a terminal IPython, the text alone."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import subprocess
import sys
import time

import pytest
from jupyter_client.manager import start_new_kernel
from servers import call, free_port

from jupyter_elastic_gpu.notebook.job import JOB_MIME_TYPE

pytestmark = pytest.mark.slow

#: A job without TensorFlow that ends in seconds.
QUICK = {
    "name": "quick",
    "kind": "synthetic",
    "synthetic": {"work": 200, "throughput": {"1": 100}, "batch": 10},
}
HANDLE = (
    "from jupyter_elastic_gpu.notebook.discovery import discover\n"
    "from jupyter_elastic_gpu.notebook.job import ElasticJob\n"
    "job = ElasticJob(discover().client(), {job_id!r}, 'quick')\n"
)


@pytest.fixture
def job_and_env(server_process):
    """A submitted job, and an environment in which the magic's discovery finds its server."""
    server = server_process(port=free_port())
    code, job = call("POST", server.api_url + "jobs", server.token, QUICK)
    assert code == 201, job
    env = {**os.environ, "ELASTIC_GPU_URL": server.api_url, "ELASTIC_GPU_TOKEN": server.token}
    return job["id"], env


def test_a_kernel_sends_one_display_of_the_job_type_and_its_final_text(job_and_env):
    job_id, env = job_and_env
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:

        def run(source: str) -> list[dict]:
            msgs: list[dict] = []
            reply = kc.execute_interactive(source, timeout=120, output_hook=msgs.append)
            assert reply["content"]["status"] == "ok", (reply["content"], msgs)
            return [m for m in msgs if m["msg_type"] not in ("status", "execute_input")]

        assert run(HANDLE.format(job_id=job_id)) == []
        shown = run("job")
        assert [m["msg_type"] for m in shown] == ["display_data"], shown
        data, display_id = shown[0]["content"]["data"], shown[0]["content"]["transient"]
        assert set(data) == {JOB_MIME_TYPE, "text/plain"}
        assert data[JOB_MIME_TYPE] == {"job_id": job_id}
        assert data["text/plain"].startswith(f"quick ({job_id}): ")

        # The card follows the job by itself: wait() only gives the output its final text.
        updated = run("job.wait();")
        assert [m["msg_type"] for m in updated] == ["update_display_data"], updated
        assert updated[0]["content"]["transient"] == display_id
        data = updated[0]["content"]["data"]
        assert set(data) == {JOB_MIME_TYPE, "text/plain"}
        assert data[JOB_MIME_TYPE] == {"job_id": job_id}
        assert data["text/plain"].startswith(f"quick ({job_id}): done")
        assert run("job.wait();") == []  # once

        again = run("job.show()")
        assert [m["msg_type"] for m in again] == ["display_data"], again
        assert again[0]["content"]["data"]["text/plain"].startswith(f"quick ({job_id}): done")
        assert run("import sys; print('ipywidgets' in sys.modules)")[0]["content"]["text"] == (
            "False\n"
        )
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_terminal_ipython_prints_the_text_view(job_and_env):
    job_id, env = job_and_env
    code = HANDLE.format(job_id=job_id) + "job.show()\njob.wait(progress=False)\njob\n"
    out = subprocess.run(
        [sys.executable, "-m", "IPython", "--quick", "--no-banner", "--colors=NoColor", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if f"quick ({job_id}): " in line]
    # shown before the wait and after it; the wait itself prints nothing in a terminal
    assert len(lines) == 2, out.stdout
    assert f"quick ({job_id}): done" in lines[-1], out.stdout
    assert JOB_MIME_TYPE not in out.stdout and "job_id" not in out.stdout


def test_a_piped_wait_prints_no_progress_bar(job_and_env):
    """Not a terminal (a pipe, a log): wait() draws no bar, so no carriage returns."""
    job_id, env = job_and_env
    code = HANDLE.format(job_id=job_id) + "print(job.wait()['state'])\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n", out.stdout
    assert "\r" not in out.stderr and "%|" not in out.stderr


#: What TensorFlow prints as it loads, whatever TF_CPP_MIN_LOG_LEVEL says (absl's banner and
#: its INFO/WARNING lines: I0000 00:00:1700000000.1   42 port.cc:153] oneDNN ...).
TF_NOTICE = re.compile(r"absl::InitializeLog|oneDNN|^[IW]\d{4} ", re.MULTILINE)

SAVE_MODEL = (
    "import keras\n"
    "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
    "model.save({path!r})\n"
)
#: A handle whose scheduler says the job is done with that model (the path load_model takes).
DONE_HANDLE = (
    "from jupyter_elastic_gpu.notebook.job import ElasticJob\n"
    "class Done:\n"
    "    def job(self, job_id):\n"
    "        return {{'id': job_id, 'state': 'done', 'model_path': {path!r}}}\n"
    "job = ElasticJob(Done(), 'j-1')\n"
)


MARK = "end of what the kernel wrote to stderr"


def _stderr(msgs: list[dict]) -> str:
    return "".join(
        m["content"]["text"]
        for m in msgs
        if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
    )


def test_load_model_shows_no_tensorflow_notices_in_the_notebook(tmp_path):
    path = str(tmp_path / "model.keras")
    # as a user's kernel starts: TensorFlow's log level not set, and descriptor 2 forwarded to
    # the notebook (ipykernel does not forward it under pytest)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTEST_CURRENT_TEST")
    }
    subprocess.run(
        [sys.executable, "-c", SAVE_MODEL.format(path=path)],
        check=True,
        capture_output=True,
        env=env,
        timeout=300,
    )
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        msgs: list[dict] = []
        source = DONE_HANDLE.format(path=path) + "print(job.load_model().count_params())"
        reply = kc.execute_interactive(source, timeout=300, output_hook=msgs.append)
        assert reply["content"]["status"] == "ok", (reply["content"], msgs)
        # C++ writes to descriptor 2, which the kernel forwards from a pipe in its own time:
        # everything written there before this mark reaches the notebook before the mark does.
        kc.execute_interactive(f"import os; os.write(2, b'{MARK}\\n')", output_hook=msgs.append)
        deadline = time.monotonic() + 60
        while MARK not in _stderr(msgs):
            assert time.monotonic() < deadline, msgs
            with contextlib.suppress(queue.Empty):
                msgs.append(kc.get_iopub_msg(timeout=1))
        streams = [m["content"] for m in msgs if m["msg_type"] == "stream"]
        assert {"name": "stdout", "text": "10\n"} in streams, streams
        errors = _stderr(msgs)
        assert errors.strip() == MARK and not TF_NOTICE.search(errors), errors
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
