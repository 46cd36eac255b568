"""Running a peer's published simulator (Pollux's, Sia's) in an interpreter of its own.

Their pinned requirements (old NumPy, pandas, pymoo) cannot share ours, so each run is a child
process of ``--python`` running one of our runner scripts (``_pollux_run.py``,
``_sia_run.py``), which prints one JSON line. Shared by ``pollux_batch_sizes.py`` and
``sia_compare.py``: one failed run stops the others, and says why in one message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future, as_completed
from pathlib import Path

from tqdm import tqdm


class ArtifactError(Exception):
    """A run of the artifact's simulator that could not start or did not finish."""


#: The artifact runs under way, so that the others stop when one fails.
_RUNNING: set[subprocess.Popen] = set()


def artifact_run(python: str, runner: Path, args: list[str], what: str) -> dict:
    """One run of ``runner`` with ``args`` in ``python``: the JSON object it printed last;
    ``what`` names the run in errors."""
    try:
        proc = subprocess.Popen(
            [python, str(runner), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as e:
        raise ArtifactError(
            f"cannot run --python {python}: {e} (make its venv as this script's docstring says)"
        ) from None
    _RUNNING.add(proc)
    try:
        out, err = proc.communicate()
    finally:
        _RUNNING.discard(proc)
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise ArtifactError(
            f"the artifact's simulator failed ({what}; is --python an interpreter with the "
            f"artifact's requirements?):\n{tail}"
        )
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        raise ArtifactError(
            f"the artifact's run ({what}) printed no result: {lines[-1]!r}"
        ) from None


def collect(
    futures: Mapping[Future, Hashable],
    on_result: Callable[[Hashable, dict], None] | None = None,
) -> dict[Hashable, list[dict]]:
    """Each future's result under its key, as they finish (with a progress bar); on a failed
    run or Ctrl-C, the others are cancelled or killed and the script exits with the reason."""
    results: dict[Hashable, list[dict]] = {}
    try:
        for future in tqdm(as_completed(futures), total=len(futures), desc="artifact runs"):
            found = future.result()
            results.setdefault(futures[future], []).append(found)
            if on_result is not None:
                on_result(futures[future], found)
    except (ArtifactError, KeyboardInterrupt) as e:
        for future in futures:
            future.cancel()
        for proc in list(_RUNNING):
            proc.kill()
        sys.exit(f"benchmark: {e}" if isinstance(e, ArtifactError) else 130)
    return results
