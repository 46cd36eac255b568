"""Trainer checkpoints in the job's ``CheckpointStore``, in the Trainer's own format.

Every rank takes part, as in the Trainer's own saving: each writes its random state, rank 0
the model, optimizer, scheduler and trainer state, all into one staging folder of the
checkpoint directory (``Trainer._save_checkpoint`` with the output directory pointed there).
After a barrier rank 0 commits that folder to the store (hard links, no copy), which makes it
atomic and verified, and a second barrier keeps every rank until it is committed. A committed
checkpoint is a folder ``Trainer.train(resume_from_checkpoint=...)`` reads as it is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import torch.distributed as dist

from ..checkpoint import Checkpoint, CheckpointStore

#: What ``meta["format"]`` says in a checkpoint this adapter wrote.
FORMAT = "transformers-trainer"
STAGING = ".staging-"


def barrier() -> None:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def clean_staging(store: CheckpointStore) -> None:
    """Remove staging folders of a generation that died while saving (rank 0, at start)."""
    for p in store.root.glob(STAGING + "*"):
        shutil.rmtree(p, ignore_errors=True)


def _linker(src: Path):
    def write(dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)

    return write


def save(trainer, store: CheckpointStore, meta: dict, *, leader: bool) -> Checkpoint | None:
    """Write the trainer's state at this step boundary; every rank calls it, rank 0 commits.
    Returns the committed checkpoint on rank 0, None elsewhere."""
    step = trainer.state.global_step
    stage = store.root / f"{STAGING}{meta.get('generation', 0)}-{step}"
    args = trainer.args
    saved = (args.output_dir, args.push_to_hub, args.save_only_model)
    # here, never pushed to a hub, and always with the optimizer, scheduler and random state
    args.output_dir, args.push_to_hub, args.save_only_model = str(stage), False, False
    try:
        trainer._save_checkpoint(trainer.model_wrapped, trial=None)
    finally:
        args.output_dir, args.push_to_hub, args.save_only_model = saved
    barrier()  # every rank's files are written
    committed = None
    if leader:
        folder = next(p for p in stage.iterdir() if p.is_dir())  # checkpoint-<step>
        files = {
            str(f.relative_to(folder)): _linker(f) for f in sorted(folder.rglob("*")) if f.is_file()
        }
        try:
            committed = store.write(files, dict(meta, format=FORMAT))
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(stage)
    barrier()  # no rank goes on (or exits) before the checkpoint is committed
    return committed
