"""Turning a notebook cell into a training script that runs in its own process.

The cell runs under a sidecar, not in the kernel, so a name defined in the notebook is not
defined there. Two things help: ``--pass a,b`` pickles those variables into the job dir and a
one-line prelude loads them before the cell runs; and a static check refuses, before anything
is submitted, a cell that reads a notebook variable it did not pass, saying how to fix it.
"""

from __future__ import annotations

import ast
import base64
import builtins
import pickle
import types
from collections.abc import Iterable, Mapping
from typing import Any

from elastic_gpu_sidecar.protocol import INPUTS

#: Kernel-only names a cell may mention without meaning a notebook variable.
_KERNEL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "display", "__file__", "__name__"}

#: One line, so that tracebacks point one line below the cell's own numbering at most.
PRELUDE = (
    "import base64 as _eg_b, json as _eg_j, os as _eg_o, pickle as _eg_p; "
    "globals().update({_k: _eg_p.loads(_eg_b.b64decode(_v)) for _k, _v in _eg_j.load(open("
    f"_eg_o.path.join(_eg_o.path.dirname(_eg_o.path.abspath(__file__)), {INPUTS!r}))).items()}}"
    "); del _eg_b, _eg_j, _eg_o, _eg_p  # variables passed with --pass\n"
)


class CellError(ValueError):
    """A cell that cannot be submitted as it is; the message says what to do."""


def _bound_and_read(tree: ast.AST) -> tuple[set[str], set[str]]:
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.MatchAs) and node.name:
            bound.add(node.name)
    return bound, read


def notebook_names_used(cell: str, user_ns: Mapping[str, Any]) -> list[str]:
    """Names the cell reads but never binds, that exist in the notebook: they would be
    undefined in the trainer. Raises CellError for a cell that does not parse."""
    try:
        tree = ast.parse(cell)
    except SyntaxError as e:
        raise CellError(f"the cell is not valid Python (line {e.lineno}: {e.msg})") from None
    bound, read = _bound_and_read(tree)
    missing = read - bound - set(dir(builtins)) - _KERNEL_NAMES
    return sorted(n for n in missing if n in user_ns and not n.startswith("_"))


def check_cell(cell: str, user_ns: Mapping[str, Any], passed: Iterable[str]) -> None:
    """Refuse a cell that uses notebook variables it does not pass."""
    missing = [n for n in notebook_names_used(cell, user_ns) if n not in set(passed)]
    if not missing:
        return
    modules = [n for n in missing if isinstance(user_ns[n], types.ModuleType)]
    values = [n for n in missing if n not in modules]
    parts = []
    if values:
        parts.append(
            f"add --pass {','.join(values)} to send {'it' if len(values) == 1 else 'them'}"
        )
    if modules:
        parts.append("import " + ", ".join(modules) + " inside the cell")
    names = ", ".join(missing)
    raise CellError(
        f"the cell uses {names} from your notebook, but it runs in its own process where "
        f"{'it is' if len(missing) == 1 else 'they are'} not defined: {' and '.join(parts)}"
    )


def pack(names: Iterable[str], user_ns: Mapping[str, Any]) -> dict[str, str]:
    """Pickle the named notebook variables (base64) for the job's inputs."""
    out = {}
    for name in names:
        if name not in user_ns:
            raise CellError(f"--pass {name}: there is no variable {name!r} in this notebook")
        try:
            blob = pickle.dumps(user_ns[name], protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # anything pickle raises: say which variable and why
            raise CellError(
                f"--pass {name}: it cannot be pickled ({type(e).__name__}: {e}); save it to a "
                "file and load it in the cell instead"
            ) from None
        out[name] = base64.b64encode(blob).decode()
    return out


def build_script(cell: str, passed: Iterable[str]) -> str:
    """The script the trainer runs: the cell, after the prelude when variables are passed."""
    return (PRELUDE if list(passed) else "") + cell
