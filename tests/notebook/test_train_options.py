"""``%%elastic_train``'s options are the CLI's (``options.JOB_OPTIONS``): ``--framework`` among
them, parsed into the request, and a refused value said as the CLI says it, naming the magic."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_elastic_gpu.notebook.client import SchedulerClient
from jupyter_elastic_gpu.notebook.magics import TRAIN, ElasticMagics, parsed
from jupyter_elastic_gpu.options import job_request


@pytest.fixture
def shell():
    """A real IPython shell with the magics, whose scheduler is nowhere: a usage error is
    raised before anything would be sent."""
    shell = InteractiveShell.instance()
    magics = ElasticMagics(shell)
    magics._client = SchedulerClient("http://127.0.0.1:9/elastic-gpu/api/", "t")
    shell.register_magics(magics)
    yield shell
    InteractiveShell.clear_instance()


@pytest.mark.parametrize("framework", ["auto", "keras", "lightning", "transformers", "torchrun"])
def test_the_framework_option_goes_into_the_request(framework):
    args = parsed(ElasticMagics.elastic_train, f"--framework {framework}", TRAIN)
    request = job_request(args, kind="script", script="import torch")
    assert request.framework == framework


def test_the_framework_is_auto_unless_said():
    args = parsed(ElasticMagics.elastic_train, "--max-gpus 2", TRAIN)
    assert job_request(args, kind="script", script="import torch").framework == "auto"


def test_a_framework_that_does_not_exist_is_a_usage_error_naming_the_magic(shell):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("elastic_train", "--framework jax", "import torch\n")
    said = str(info.value)
    assert said.startswith(f"{TRAIN}: --framework: must be one of "), said
    assert "torchrun" in said and said.endswith("got 'jax'")


def test_the_magic_help_lists_the_frameworks():
    doc = ElasticMagics.elastic_train.__doc__
    assert "--framework {auto,keras,lightning,transformers,torchrun}" in doc


def test_a_mig_profile_goes_into_the_request_as_nvml_writes_it():
    args = parsed(ElasticMagics.elastic_train, "--mig 3G.40GB", TRAIN)
    assert job_request(args, kind="script", script="import keras").mig == "3g.40gb"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("--mig big", "--mig: 'big' is not a MIG profile: expected one such as 1g.10gb"),
        ("--mig 1g.10gb --max-gpus 2", "runs on one device: --min-gpus, --max-gpus and"),
    ],
)
def test_a_mig_request_that_cannot_be_is_a_usage_error_naming_the_magic(shell, line, said):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("elastic_train", line, "import keras\n")
    assert str(info.value).startswith(TRAIN) and said in str(info.value), str(info.value)
