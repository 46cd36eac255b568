"""Beyond JupyterLab's kernels: TensorFlow in a plain kernel finds no GPU; nbclient (no Jupyter
server of its own) honours a leased kernel spec and frees the lease when it is done."""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient

from jupyter_elastic_gpu.kernels import ENV_CUDA, NO_GPU


def test_tensorflow_in_a_plain_kernel_lists_no_gpu(lab):
    server = lab()
    kernel = server.start_kernel("python3")
    code = (
        "import os, tensorflow as tf\n"
        "print(os.environ['CUDA_VISIBLE_DEVICES'], tf.config.list_logical_devices('GPU'))"
    )
    assert server.run(kernel, code).split() == [NO_GPU, "[]"]


def test_nbclient_runs_a_leased_kernel_spec_and_frees_the_lease(lab, kernel_env, monkeypatch):
    server = lab()
    for name, value in kernel_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ELASTIC_GPU_URL", server.base)
    monkeypatch.setenv("ELASTIC_GPU_TOKEN", server.token)
    cells = [
        nbformat.v4.new_code_cell(f"import os; print(os.environ[{ENV_CUDA!r}])"),
        nbformat.v4.new_code_cell("print(os.environ.get('ELASTIC_GPU_LEASE'))"),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3-gpu1", "display_name": "x", "language": "python"}
    NotebookClient(nb, timeout=120, startup_timeout=300, kernel_name="python3-gpu1").execute()
    (lease,) = server.leases()
    gpus = nb.cells[0].outputs[0]["text"].strip()
    assert len(gpus.split(",")) == 1 and nb.cells[1].outputs[0]["text"].strip() == lease["id"]
    assert lease["state"] == "done"  # freed when nbclient shut the kernel down

    plain = nbformat.v4.new_notebook(cells=[cells[0]])
    monkeypatch.setenv("JUPYTER_DEFAULT_PROVISIONER_NAME", "elastic-gpu-provisioner")
    NotebookClient(plain, timeout=120, startup_timeout=300, kernel_name="python3").execute()
    assert plain.cells[0].outputs[0]["text"].strip() == NO_GPU
