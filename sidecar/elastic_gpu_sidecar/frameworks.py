"""Which framework a training script uses, read from its source, and whether it can be resized.

Both sides need the answer before anything runs: the scheduler, to know whether a job may
change its GPU count (a script it cannot resize keeps one count for its whole run, and the
job's view says why), and the trainer, to pick the adapter. So it is decided here, from the
script's own imports and calls (``ast``, no import of the script or of any framework), and
``--framework`` overrides it. Standard library only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .protocol import Framework

#: Modules whose import says which adapter runs a script, most specific first.
_LIGHTNING = {"lightning", "pytorch_lightning"}
_TRANSFORMERS_TRAINERS = {"Trainer", "Seq2SeqTrainer"}
_KERAS = {"keras", "tensorflow"}
_TORCH = {"torch"}
#: Calls that join a script's ranks in a process group: a torch script without one is a plain
#: loop that trains in one process.
_GROUP_STARTS = {"init_process_group", "init_device_mesh"}


@dataclass(frozen=True)
class Detected:
    framework: Framework
    #: False: the job runs at one GPU count for its whole run (``why`` says what is missing).
    elastic: bool
    why: str | None = None
    #: True: the script trains in one process on one device, whatever it is granted.
    one_device: bool = False


class _Uses(ast.NodeVisitor):
    """The top-level modules a script imports, the names it imports from them, and the
    attribute and function names it calls (enough to tell a checkpoint of its own)."""

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.imported: dict[str, set[str]] = {}
        self.calls: set[str] = set()
        self.attributes: set[str] = set()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.modules.add(alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            top = node.module.split(".")[0]
            self.modules.add(top)
            self.imported.setdefault(top, set()).update(a.name for a in node.names)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.attributes.add(node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            self.calls.add(func.attr)
        elif isinstance(func, ast.Name):
            self.calls.add(func.id)
        self.generic_visit(node)


def _uses_hf_trainer(uses: _Uses) -> bool:
    names = uses.imported.get("transformers", set()) | uses.attributes
    return bool(names & _TRANSFORMERS_TRAINERS)


def _resumes_itself(uses: _Uses) -> bool:
    """A torchrun-style script that saves a checkpoint and loads it back when one exists."""
    saves = "save" in uses.calls
    loads = "load" in uses.calls or "load_state_dict" in uses.calls
    return saves and loads


def _read(source: str) -> _Uses | None:
    """What a script imports and calls; None when it does not parse."""
    try:
        uses = _Uses()
        uses.visit(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError):
        return None
    return uses


def resumes_itself(source: str) -> bool:
    """Whether a script saves a checkpoint of its own and loads it back (unreadable: no)."""
    uses = _read(source)
    return uses is not None and _resumes_itself(uses)


def starts_process_group(source: str) -> bool:
    """Whether a script joins its ranks in a process group (unreadable: assume it does)."""
    uses = _read(source)
    return uses is None or bool(uses.calls & _GROUP_STARTS)


def detect(source: str, framework: Framework | str = Framework.AUTO) -> Detected:
    """The adapter of a script and whether it can be resized; ``framework`` is what the user
    said (``auto``: read the script)."""
    framework = Framework(framework)
    uses = _read(source)
    if framework == Framework.AUTO:
        framework = _guess(uses)
        if framework is None:
            return Detected(
                Framework.KERAS,
                elastic=False,
                why="no supported framework among the script's imports (keras, tensorflow, "
                "lightning, transformers, torch): it runs at one GPU count; say which with "
                "--framework if a module it imports does the training",
            )
    if framework == Framework.TORCHRUN and uses is not None and not uses.calls & _GROUP_STARTS:
        return Detected(
            framework,
            elastic=False,
            one_device=True,
            why="the script starts no process group (init_process_group or init_device_mesh): "
            "it trains in one process, on one GPU",
        )
    if framework == Framework.TORCHRUN and (uses is None or not _resumes_itself(uses)):
        return Detected(
            framework,
            elastic=False,
            why="the script saves and loads no checkpoint of its own (torch.save and "
            "torch.load or load_state_dict): a restart on other GPUs would start it over, so "
            "it runs at one GPU count",
        )
    return Detected(framework, elastic=True)


def _guess(uses: _Uses | None) -> Framework | None:
    if uses is None:
        return None
    if uses.modules & _LIGHTNING:
        return Framework.LIGHTNING
    if "transformers" in uses.modules and _uses_hf_trainer(uses):
        return Framework.TRANSFORMERS
    if uses.modules & _KERAS:
        return Framework.KERAS
    if uses.modules & _TORCH or "transformers" in uses.modules:
        return Framework.TORCHRUN
    return None
