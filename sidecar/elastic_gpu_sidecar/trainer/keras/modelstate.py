"""Model, optimizer and metric state as plain arrays, independent of the replica count.

A checkpoint must restore onto a different number of devices than it was taken on, so state
is saved as host arrays (one value per variable, mirrored variables read once) and assigned
back variable by variable: a mirrored assignment from the cross-replica context writes every
replica (on JAX, a replicated array is laid out again over the current devices). Variables
are matched by order and checked by shape, because the script re-creates the same model in
the same order on every restart. The backend's ``sync`` comes first: on JAX a running ``fit``
keeps the newest state outside the variables.
"""

from __future__ import annotations

import numpy as np

from .backends import current

GROUPS = ("model", "optimizer", "metrics")


class RestoreMismatch(RuntimeError):
    """The checkpoint does not fit the model the script built this time."""


def variables(model, group: str) -> list:
    if group == "model":
        return list(model.variables)
    if group == "optimizer":
        opt = getattr(model, "optimizer", None)
        return list(opt.variables) if opt is not None else []
    return list(getattr(model, "metrics_variables", []))


def ensure_built(model, sample_batch) -> None:
    """Create every variable (model, optimizer, metrics) before the first step.

    Keras builds lazily (on TensorFlow, in the strategy's scope only when the first step is
    traced); restoring needs the variables now. ``_symbolic_build`` is what ``fit`` itself uses: it
    builds from shapes without computing anything.
    """
    opt = getattr(model, "optimizer", None)
    if (
        model.built
        and all(layer.built for layer in model._flatten_layers())
        and (opt is None or opt.built)
    ):
        metrics = getattr(model, "_compile_metrics", None)
        if metrics is None or metrics.built:
            return
    with current().build_scope(model):
        model._symbolic_build(data_batch=sample_batch)


def capture(model) -> tuple[dict[str, np.ndarray], dict[str, list]]:
    current().sync(model)  # JAX keeps the state of a running fit outside the variables
    arrays: dict[str, np.ndarray] = {}
    layout: dict[str, list] = {}
    for group in GROUPS:
        vs = variables(model, group)
        layout[group] = [[v.path, list(v.shape), str(v.dtype)] for v in vs]
        for i, v in enumerate(vs):
            arrays[f"{group}/{i:06d}"] = np.asarray(v.numpy())
    return arrays, layout


def save_npz(arrays: dict[str, np.ndarray]):
    """A checkpoint file writer (``CheckpointStore.write`` calls it with the target path)."""

    def write(path) -> None:
        with open(path, "wb") as f:
            np.savez(f, **arrays)

    return write


def load(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def assign_group(model, group: str, arrays: dict[str, np.ndarray]) -> int:
    vs = variables(model, group)
    keys = sorted(k for k in arrays if k.startswith(group + "/"))
    if len(keys) != len(vs):
        raise RestoreMismatch(
            f"the checkpoint has {len(keys)} {group} variables, the model built by the script "
            f"has {len(vs)}: was the script changed since the job started?"
        )
    for v, k in zip(vs, keys):
        value = arrays[k]
        if tuple(v.shape) != value.shape:
            raise RestoreMismatch(
                f"{group} variable {v.path} has shape {tuple(v.shape)}, the checkpoint has "
                f"{value.shape}: was the script changed since the job started?"
            )
        v.assign(value)
    return len(vs)
