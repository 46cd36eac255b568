"""What a sidecar, and so its trainer, gets of the environment that starts it: what training
needs (an allow-list, which a lab extends with ``pass_env``) and the admin's ``environment``,
never a variable named like a credential. The same environment of a real user's server under
a real JupyterHub: tests/security/test_trainer_env.py."""

from __future__ import annotations

from elastic_gpu_sidecar import protocol as P
from traitlets.config import Config

from jupyter_elastic_gpu.scheduler.execution.launcher import LocalLauncher, sidecar_env

#: What a trainer needs from a GPU box's environment: all of it passes.
NEEDED = {
    "PATH": "/opt/venv/bin:/usr/bin",
    "HOME": "/home/ann",
    "USER": "ann",
    "LOGNAME": "ann",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "Europe/Paris",
    "TMPDIR": "/scratch/tmp",
    "PYTHONPATH": "/opt/lab/lib",
    "VIRTUAL_ENV": "/opt/venv",
    "CONDA_PREFIX": "/opt/conda",
    "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
    "CUDA_HOME": "/usr/local/cuda",
    "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    "NCCL_DEBUG": "WARN",
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    "XLA_FLAGS": "--xla_gpu_autotune_level=2",
    "KERAS_BACKEND": "tensorflow",
    "OMP_NUM_THREADS": "4",
    "MKL_NUM_THREADS": "4",
    "OPENBLAS_CORETYPE": "Haswell",
    "HF_HOME": "/data/hf",
    "TORCH_HOME": "/data/torch",
    "https_proxy": "http://proxy.lab:3128",
    "NO_PROXY": "localhost,127.0.0.1",
    P.ENV_PROGRESS_INTERVAL: "0.2",
}
#: Named like a credential: none passes, whatever pattern allows it.
CREDENTIALS = {
    "JUPYTERHUB_API_TOKEN": "hub-token",
    "JPY_API_TOKEN": "hub-token",
    "JUPYTERHUB_CLIENT_ID": "jupyterhub-user-ann",
    "JUPYTER_TOKEN": "server-token",
    "ELASTIC_GPU_TOKEN": "scheduler-token",
    "HF_TOKEN": "hf_abc",
    "NVIDIA_API_KEY": "nvapi-abc",
    "TF_SECRET_SAUCE": "x",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "MLFLOW_TRACKING_PASSWORD": "pw",
    "LAB_SESSION_COOKIE": "c",
    "RAY_AUTH_TOKEN": "ray",
    "SSH_AUTH_SOCK": "/tmp/ssh-abc/agent.1",  # the way to the user's keys
    "http_proxy": "http://ann:pw@proxy.lab:3128",  # a proxy with its user's password
    P.ENV_SECRET: "another-jobs-secret",  # a server started from a trainer
}
#: Neither needed nor named like a credential, and still nothing for a trainer to carry.
OTHERS = {
    "KRB5CCNAME": "FILE:/tmp/krb5cc_1000",
    "JUPYTER_RUNTIME_DIR": "/home/ann/.local/share/jupyter/runtime",
    "ELASTIC_GPU_URL": "http://127.0.0.1:9111/",
    "MYLAB_DATA": "/data/mylab",
}
SERVER = {**NEEDED, **CREDENTIALS, **OTHERS}


def test_only_what_training_needs_passes_with_the_jobs_secret():
    env = sidecar_env(SERVER, "job-secret")
    assert env == {**NEEDED, P.ENV_SECRET: "job-secret", "TF_CPP_MIN_LOG_LEVEL": "2"}


def test_a_labs_patterns_add_to_the_list_but_never_a_credential():
    env = sidecar_env(SERVER, "job-secret", patterns=["MYLAB_*", "KRB5CCNAME"])
    assert env["MYLAB_DATA"] == "/data/mylab" and env["KRB5CCNAME"] == OTHERS["KRB5CCNAME"]
    everything = sidecar_env(SERVER, "job-secret", patterns=["*"])
    assert set(everything) == {*NEEDED, *OTHERS, P.ENV_SECRET, "TF_CPP_MIN_LOG_LEVEL"}
    assert everything[P.ENV_SECRET] == "job-secret"


def test_the_admins_environment_passes_as_given():
    given = {"HF_TOKEN": "lab-read-only", "OMP_NUM_THREADS": "1"}
    env = sidecar_env(SERVER, "job-secret", environment=given)
    assert env["HF_TOKEN"] == "lab-read-only" and env["OMP_NUM_THREADS"] == "1"
    assert env[P.ENV_SECRET] == "job-secret"


def test_pass_env_is_a_launcher_setting():
    config = Config({"LocalLauncher": {"pass_env": ["MYLAB_*"]}})
    assert LocalLauncher(config=config).pass_env == ["MYLAB_*"]
