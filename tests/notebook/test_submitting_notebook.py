"""``%%elastic_train`` records the notebook that submitted the job, relative to the Jupyter
server's root, from what jupyter_server tells the kernel (``JPY_SESSION_NAME``, which ipykernel
copies to ``__session__``) and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from jupyter_client import BlockingKernelClient
from nbformat.v4 import new_notebook
from servers import call, free_port, get_json

from jupyter_elastic_gpu.notebook.magics import SESSION_ENV, submitting_notebook


@pytest.fixture
def server_pid():
    """A live process standing for the Jupyter server that started the kernel."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield p.pid
    p.kill()
    p.wait()


@pytest.fixture
def environ(tmp_path, server_pid):
    """A kernel's environment: the server's runtime file names its root."""
    runtime, root = tmp_path / "runtime", tmp_path / "root"
    (root / "projects").mkdir(parents=True)
    runtime.mkdir()
    info = {"pid": server_pid, "url": "http://127.0.0.1:8888/", "root_dir": str(root)}
    (runtime / f"jpserver-{server_pid}.json").write_text(json.dumps(info))
    return {"JUPYTER_RUNTIME_DIR": str(runtime), "JPY_PARENT_PID": str(server_pid)}


def test_a_relative_session_path_is_the_notebook(environ):
    env = {**environ, SESSION_ENV: "projects/mnist.ipynb"}
    assert submitting_notebook({}, env) == "projects/mnist.ipynb"


def test_jupyterlabs_absolute_session_path_is_made_relative_to_the_root(environ, tmp_path):
    """JupyterLab names its sessions, and jupyter_server then sets the notebook's OS path."""
    absolute = str(tmp_path / "root" / "projects" / "mnist.ipynb")
    assert submitting_notebook({"__session__": absolute}, environ) == "projects/mnist.ipynb"
    assert submitting_notebook({}, {**environ, SESSION_ENV: absolute}) == "projects/mnist.ipynb"


@pytest.mark.parametrize(
    "session",
    [
        None,  # a kernel no Jupyter server started
        "Console 1",  # a console's session
        "/elsewhere/mnist.ipynb",  # outside the server's root
        "../mnist.ipynb",
    ],
)
def test_no_notebook_is_named_when_there_is_none_under_the_root(environ, session):
    env = dict(environ) if session is None else {**environ, SESSION_ENV: session}
    assert submitting_notebook({}, env) is None


def test_an_absolute_path_without_a_server_names_nothing(tmp_path):
    assert submitting_notebook({"__session__": str(tmp_path / "a.ipynb")}, {}) is None


@pytest.mark.slow
def test_a_notebook_job_records_its_notebook(server_process, tmp_path):
    """A kernel JupyterLab's way: a session with a path and a name, started by a real server;
    the job its ``%%elastic_train`` submits records the path the file browser shows."""
    server = server_process(port=free_port())
    (tmp_path / "projects").mkdir()
    nbformat.write(new_notebook(), tmp_path / "projects" / "mnist.ipynb")
    session = {
        "path": "projects/mnist.ipynb",
        "name": "mnist.ipynb",  # JupyterLab names its sessions: the kernel gets an OS path
        "type": "notebook",
        "kernel": {"name": "python3"},
    }
    code, created = call("POST", server.url + "api/sessions", server.token, session)
    assert code == 201, created
    connection = server.root / f"{server.name}-runtime" / f"kernel-{created['kernel']['id']}.json"
    kernel = BlockingKernelClient(connection_file=str(connection))
    kernel.load_connection_file()
    kernel.start_channels(hb=False)  # a late heartbeat on a loaded machine is not a death
    try:
        kernel.wait_for_ready(timeout=120)
        out: list[str] = []

        def run(source: str) -> None:
            reply = kernel.execute_interactive(source, timeout=120, output_hook=keep(out))
            assert reply["content"]["status"] == "ok", (reply["content"], out)

        run("%load_ext jupyter_elastic_gpu")
        run("%%elastic_train --name from-nb --as job\nprint('hello')\n")
        run("print('NOTEBOOK', job.status()['notebook'])")
        run("print('HELD', job.suspend()['held'], job.resume()['held']); job.cancel()")
        run("print('KEPT', job.keep()['kept'], job.keep(False)['kept'], job.keep()['kept'])")
    finally:
        kernel.stop_channels()
        call("DELETE", server.url + f"api/sessions/{created['id']}", server.token)
    assert "NOTEBOOK projects/mnist.ipynb" in "".join(out), out
    assert "HELD True False" in "".join(out), out  # the handle suspends and resumes its job
    assert "KEPT True False True" in "".join(out), out  # and keeps it past the retention
    jobs = get_json(server.api_url + "jobs", server.token)["jobs"]
    assert [j["notebook"] for j in jobs if j["name"] == "from-nb"] == ["projects/mnist.ipynb"]
    assert [j["kept"] for j in jobs if j["name"] == "from-nb"] == [True]


def keep(out: list[str]):
    def hook(msg: dict) -> None:
        content = msg.get("content", {})
        if msg.get("msg_type") == "stream":
            out.append(content["text"])
        elif msg.get("msg_type") == "error":
            out.append(f"{content['ename']}: {content['evalue']}")

    return hook
