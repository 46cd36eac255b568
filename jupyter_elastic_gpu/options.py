"""The options of a job submission, one set for ``%%elastic_train`` and ``jupyter elastic-gpu
submit``: the same flags, defaults, help and checks, and the same request built from them.

Each front end adds ``JOB_OPTIONS`` to its own parser (argparse for the CLI, IPython's
magic_arguments for the magic, which is argparse too) and hands the parsed values to
``job_request``; the request model (``models.SubmitRequest``) does every check and names the
flag in its message. What a count above the server's GPUs means is decided by the scheduler,
the same for everyone (``SubmitRequest.fit_to``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from elastic_gpu_sidecar.protocol import BatchPolicy, Framework
from pydantic import ValidationError

from .errors import BadRequest
from .models import SubmitRequest, describe

#: (flags, argparse keyword arguments) of every option a submission has.
JOB_OPTIONS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--name",), {"help": "a name for the job (default: the script's name, or the job id)"}),
    (
        ("--min-gpus",),
        {"type": int, "metavar": "N", "help": "fewest GPUs the job can run on (default 1)"},
    ),
    (
        ("--max-gpus",),
        {
            "type": int,
            "metavar": "N",
            "help": "most GPUs the job can use (default: every GPU of the server; the scheduler "
            "grows and shrinks the job in between, and lowers a maximum above what the server "
            "has)",
        },
    ),
    (
        ("--requested-gpus",),
        {
            "type": int,
            "metavar": "N",
            "help": "GPUs to ask for, which non-elastic policies give (default: --min-gpus)",
        },
    ),
    (
        ("--mig",),
        {
            "metavar": "PROFILE",
            "help": "run on one MIG slice of this profile (1g.10gb) instead of whole GPUs: one "
            "device, never resized (where a GPU is in MIG mode)",
        },
    ),
    (
        ("--epochs",),
        {"type": int, "metavar": "E", "help": "override the epochs of every fit() call"},
    ),
    (
        ("--priority",),
        {"type": float, "metavar": "P", "help": "weight against other jobs (default 1)"},
    ),
    (
        ("--batch-policy",),
        {
            "choices": BatchPolicy.values(),
            "help": "on a resize keep the global batch (keep-global, the default) or the "
            "per-replica batch (keep-per-replica: the learning rate scales)",
        },
    ),
    (
        ("--measure-noise",),
        {
            "action": "store_true",
            "default": None,
            "help": "measure the gradient noise scale as the job trains (Keras scripts): the "
            "job's view says which batch sizes use each sample well",
        },
    ),
    (
        ("--framework",),
        {
            "choices": Framework.values(),
            "help": "the framework that trains the script (auto, the default: read from its "
            "imports); a script its framework cannot resize runs at --requested-gpus throughout",
        },
    ),
    (
        ("--simulated",),
        {
            "action": "store_true",
            "default": None,
            "help": "run on simulated GPUs (logical CPU devices) even where real ones exist",
        },
    ),
]

#: Request field of each option, and its flag.
_FLAGS = {flags[0][2:].replace("-", "_"): flags[0] for flags, _ in JOB_OPTIONS}
#: Field names a message may use in its sentences (those that are no ordinary word).
_IN_TEXT = re.compile(r"\b(" + "|".join(f for f in _FLAGS if "_" in f) + r")\b")


def add_job_options(parser: argparse.ArgumentParser | Any) -> None:
    """Add every submission option to an argparse parser (or argument group)."""
    for flags, kwargs in JOB_OPTIONS:
        parser.add_argument(*flags, **kwargs)


def magic_job_options(func: Callable) -> Callable:
    """Decorate a magic with every submission option (IPython's ``@argument``)."""
    from IPython.core.magic_arguments import argument

    for flags, kwargs in reversed(JOB_OPTIONS):
        func = argument(*flags, **kwargs)(func)
    return func


def job_request(args: argparse.Namespace, **fields: Any) -> SubmitRequest:
    """The submit request for parsed options plus ``fields`` (kind, script, inputs ...);
    BadRequest naming the flag when a value is refused."""
    body = {name: getattr(args, name) for name in _FLAGS if getattr(args, name, None) is not None}
    body.update({k: v for k, v in fields.items() if v is not None})
    try:
        return SubmitRequest.model_validate(body)
    except ValidationError as e:
        raise BadRequest(describe(e, as_flags)) from None


def as_flags(text: str) -> str:
    """``text`` with request fields named as the flags a user typed."""
    if text in _FLAGS:
        return _FLAGS[text]
    return _IN_TEXT.sub(lambda m: _FLAGS[m.group(1)], text)


#: argparse's own words for a refused option value, and the same in the project's voice (the
#: request model's: ``--max-gpus: must be a whole number, got 'x'``).
_ARGPARSE_SAYS = [
    (
        re.compile(r"^argument ([^:]+): invalid int value: (.*)$"),
        r"\1: must be a whole number, got \2",
    ),
    (re.compile(r"^argument ([^:]+): invalid float value: (.*)$"), r"\1: must be a number, got \2"),
    (
        re.compile(r"^argument ([^:]+): invalid choice: (.*) \(choose from (.*)\)$"),
        r"\1: must be one of \3, got \2",
    ),
    (re.compile(r"^argument ([^:]+): expected one argument$"), r"\1: a value is required"),
    (re.compile(r"^argument ([^:]+): (.*)$"), r"\1: \2"),
    (re.compile(r"^the following arguments are required: (.*)$"), r"\1: a value is required"),
]


def in_our_voice(message: str) -> str:
    """An argparse error message said as the request model says a refused value, so that a bad
    flag reads the same whether argparse or the model refuses it."""
    for pattern, says in _ARGPARSE_SAYS:
        if pattern.match(message):
            return pattern.sub(says, message)
    return message


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are in the project's voice (``in_our_voice``); its
    sub-command parsers are of this class too."""

    def error(self, message: str):  # type: ignore[override]
        super().error(in_our_voice(message))
