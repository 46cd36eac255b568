"""Tell a user's bug from an infrastructure failure, and say what to do about it.

A user error is not retried (the same code fails the same way); an infrastructure error is
(a device dropped, the runtime aborted). The hints speak of scripts, whoever submitted them:
what a notebook adds for its cells it says itself (``jupyter_elastic_gpu.notebook.text``).
"""

from __future__ import annotations

import os
import traceback


class JobSetupError(Exception):
    """The job's own settings rule out running it (an adapter that cannot serve them, such as
    an unsupported ``KERAS_BACKEND``): a user error, so not retried, raised before the script
    runs with a message that says what to change."""


# TensorFlow error classes whose cause lies below the user's code. Matched by name so that
# this module stays free of TensorFlow.
_INFRA_TYPES = {
    "UnavailableError",
    "AbortedError",
    "InternalError",
    "DataLossError",
    "CancelledError",
}

_OUT_OF_MEMORY = (
    "out of device memory at this GPU count: under the keep-global batch policy each GPU's "
    "batch is the global batch / the GPUs (it grows when the job shrinks), under "
    "keep-per-replica the global batch grows with the GPUs; raise --min-gpus to the fewest "
    "GPUs the batch fits on, or make the batch smaller"
)

_HINTS = {
    "NameError": (
        "the script runs in a Python process of its own: every name it uses must be defined or "
        "imported by the script itself"
    ),
    "ModuleNotFoundError": (
        "the trainer runs in the Python environment of {python}; install the missing package "
        "there (the notebook kernel may use another environment)"
    ),
    "ImportError": "the trainer runs in the Python environment of {python}; check the package there",
    "FileNotFoundError": (
        "relative paths are resolved from the job's working directory ({cwd}); use absolute "
        "paths or paths relative to that directory"
    ),
    "ResourceExhaustedError": _OUT_OF_MEMORY,
    "OutOfMemoryError": _OUT_OF_MEMORY,  # torch.OutOfMemoryError
}


def is_infrastructure(exc: BaseException) -> bool:
    return type(exc).__name__ in _INFRA_TYPES


def hint_for(type_name: str, message: str = "", *, python: str = "", cwd: str = "") -> str | None:
    if "Mixing different tf.distribute.Strategy" in message:
        return (
            "the job already runs under a distribution strategy chosen by the scheduler; "
            "create at most one tf.distribute.MirroredStrategy() and build the model in its scope"
        )
    if "CUDA out of memory" in message:  # torch before OutOfMemoryError had a class of its own
        type_name = "OutOfMemoryError"
    text = _HINTS.get(type_name)
    return None if text is None else text.format(python=python, cwd=cwd)


def user_traceback(exc: BaseException, skip_files: tuple[str, ...] = ()) -> str:
    """The traceback without the bootstrap's own frames (the user did not write them)."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not any(f.filename.startswith(s) for s in skip_files)
        and os.path.basename(f.filename) not in ("runpy.py", "<frozen runpy>")
    ]
    lines = ["Traceback (most recent call last):\n"]
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def describe(exc: BaseException, *, skip_files: tuple[str, ...] = (), cwd: str = "") -> dict:
    import sys

    message = str(exc)
    return {
        "type": type(exc).__name__,
        "message": message,
        "traceback": user_traceback(exc, skip_files),
        "hint": hint_for(type(exc).__name__, message, python=sys.executable, cwd=cwd),
        "kind": "infrastructure" if is_infrastructure(exc) else "user",
    }
