"""The framework adapter interface: what the trainer process asks of a training framework.

The trainer (``run.py``) is the same for every framework: it installs the stop handler, reads
the job and its grant, has the job's adapter take over the framework's training entry points,
runs the user's script unchanged, and lets the adapter finish. An adapter makes the
framework's own training loop elastic from outside the user's code: a checkpoint at the next
step when a stop is asked for, a resume at the exact step after a restart on other GPUs, the
global batch kept or scaled as the job's batch policy says (``protocol.BatchPolicy``), and
progress written as ``progress.py`` writes it, so that the sidecar and the scheduler need no
change for a new framework.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

from ..frameworks import detect
from ..jobdir import JobDir
from ..protocol import Framework
from .stopsignal import StopRequest


@dataclass(frozen=True)
class TrainerContext:
    """One trainer process's job and grant: what an adapter starts from."""

    job: JobDir
    #: The job's settings as the scheduler wrote them (``protocol.JOB``).
    config: dict
    #: The grant's generation: a restart on other GPUs is a new one.
    generation: int
    #: The grant's GPUs (simulated ones are CPU devices).
    gpus: list[str]
    simulated: bool
    stop: StopRequest


class Session(Protocol):
    """What an adapter leaves running while the user's script trains."""

    #: When the framework was imported (seconds since the epoch; at once from a standby):
    #: the first progress record reports it, so a restart's cost can be told apart.
    ready_at: float | None

    def on_stop_signal(self) -> None:
        """A stop was asked for (``stopsignal``): checkpoint at the next step, then exit."""

    def finalize(self) -> None:
        """The script ended: save what the job produced (its last model)."""

    def wait_background(self) -> None:
        """Wait for writes still under way (a checkpoint) before the process ends."""


class FrameworkAdapter(Protocol):
    """One training framework, made elastic."""

    #: The framework's name, as a job's view and its log say it.
    name: str

    #: True: data parallel is one process per device (PyTorch DDP): the trainer process
    #: starts one rank per device of the grant (``ranks.py``) and each rank runs the script
    #: under this adapter. False: one process drives every device (a ``tf.distribute``
    #: strategy).
    process_per_device: bool

    def import_framework(self) -> None:
        """Import the framework without touching a device: a standby interpreter does this
        before it has a grant, so that a restart on new GPUs does not wait for the import."""

    def start(self, context: TrainerContext) -> Session:
        """Set the devices for the grant and take over the framework's training entry points,
        before the script runs (in each rank, where ``process_per_device``)."""


#: The adapter of each framework: its module (under ``trainer``) and class. Imported only when
#: a job uses it: each framework takes seconds to import.
ADAPTERS = {
    Framework.KERAS: ("keras", "KerasAdapter"),
    Framework.LIGHTNING: ("lightning", "LightningAdapter"),
    Framework.TRANSFORMERS: ("hf", "TransformersAdapter"),
    Framework.TORCHRUN: ("torchrun", "TorchrunAdapter"),
}


def framework_of(config: dict) -> Framework:
    """The job's framework: as its settings say, else read from its script."""
    said = config.get("framework") or Framework.AUTO
    if said != Framework.AUTO:
        return Framework(said)
    try:
        with open(config["script"], encoding="utf-8") as f:
            source = f.read()
    except (KeyError, OSError, UnicodeDecodeError):
        source = ""
    return detect(source).framework


def adapter_for(config: dict) -> FrameworkAdapter:
    """The adapter of a job (``config``: its settings)."""
    module, cls = ADAPTERS[framework_of(config)]
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)()
