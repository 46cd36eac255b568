"""What differs between Keras 3's backends, behind one small interface.

Keras 3 runs the same ``Model.fit`` on TensorFlow, JAX or PyTorch, chosen by ``KERAS_BACKEND``
(or ``keras.json``) when Keras is imported. The elastic machinery (position, checkpoints,
progress, batch policy) is the same for all of them; what differs is how the grant's devices
are set up and when that must happen, how the model's state is read while ``fit`` runs, and
how an array input is fed. Each backend answers those questions in its own module
(``tfbackend``, ``jaxbackend``, ``torchbackend``); this module picks one without importing
any framework, because JAX must be configured before it is imported.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys

from ...errors import JobSetupError

#: The backend Keras uses when nothing says otherwise.
DEFAULT = "tensorflow"

#: Each backend's module (in this package) and class.
_MODULES = {
    "tensorflow": ("tfbackend", "TensorFlowBackend"),
    "jax": ("jaxbackend", "JaxBackend"),
    "torch": ("torchbackend", "TorchBackend"),
}


def configured() -> str:
    """The backend Keras will use, as Keras decides it, without importing Keras:
    ``KERAS_BACKEND``, else the ``backend`` of ``$KERAS_HOME/keras.json`` (``~/.keras``)."""
    said = os.environ.get("KERAS_BACKEND", "").strip()
    if said:
        return said
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as f:
            return str(json.load(f).get("backend") or DEFAULT)
    except (OSError, ValueError, AttributeError):
        return DEFAULT


class Backend:
    """The defaults: one process, every device of the grant driven by Keras itself, state in
    the Keras variables, arrays fed as NumPy batches (``npinputs``)."""

    name = ""
    #: How the log names it.
    label = ""
    #: Whether the data-parallel replica count follows the grant (False: one device).
    elastic = True

    def prepare(self, gpus: list[str], simulated: bool) -> None:
        """Before Keras is imported: set what the framework reads once, at import."""

    def standby_import(self) -> str | None:
        """What a standby interpreter imports before it knows its grant. Default: everything
        (nothing there depends on the grant); else returns why it imports nothing."""
        self.import_framework()
        return None

    def import_framework(self) -> None:
        from . import bootstrap  # noqa: F401  (Keras and the backend)

    def setup(self, gpus: list[str], simulated: bool) -> int:
        """Set the grant's devices up before the script runs; returns the replica count."""
        raise NotImplementedError

    def build_scope(self, model):
        """The context in which a model's variables are created before the first step."""
        return contextlib.nullcontext()

    def sync(self, model) -> None:
        """Make the model's variables hold the values training has reached."""

    def install(self, model) -> None:
        """Adjust a model the first time it is fitted."""

    def array_input(self, data, **plan):
        """The two inputs of a resumed fit on arrays (``npinputs.array_input``)."""
        from . import npinputs

        return npinputs.array_input(data, **plan)

    @contextlib.contextmanager
    def saving(self):
        """Around the final ``model.save``: Keras' serialization asks whether each value is a
        TensorFlow shape or dtype, importing TensorFlow (seconds) to find out; a script that
        never imported it has none, so Keras is told it is absent while the model is saved."""
        from keras.src.utils.module_utils import tensorflow

        if "tensorflow" in sys.modules or tensorflow._available is not None:
            yield
            return
        tensorflow._available = False
        try:
            yield
        finally:
            tensorflow._available = None

    def check_split(self, global_batch: int, last_batch: int, replicas: int) -> None:
        """Raise when the backend cannot split these batches over ``replicas`` devices."""


_current: Backend | None = None


def current() -> Backend:
    """The job's backend (decided once per process)."""
    global _current
    if _current is None:
        name = configured()
        if name not in _MODULES:
            raise JobSetupError(
                f"KERAS_BACKEND={name!r}: the elastic trainer supports "
                + ", ".join(sorted(_MODULES))
                + "; set one of them in the environment the job starts from"
            )
        module, cls = _MODULES[name]
        _current = getattr(importlib.import_module(f"{__package__}.{module}"), cls)()
    return _current
