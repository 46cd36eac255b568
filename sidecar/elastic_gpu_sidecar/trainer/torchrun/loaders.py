"""Where the script is in its data: the epoch, the batch in the epoch, the per-rank batch.

The script iterates its own ``DataLoader``; nothing of it changes. ``DataLoader.__iter__``
and the iterators' ``__next__`` are wrapped to count, per loader, the iterations (epochs)
and the batches taken from the current one. The loader that fed the last batch before an
optimizer step is the training loader (a validation loader yields no step). The epoch is
its ``DistributedSampler``'s (``set_epoch``) when it has one, else counted from the
iterations of this process on top of the epoch the last save was in.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass

from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter


@dataclass
class _Loader:
    batch_size: int | None
    length: int | None
    sampler: object
    iterations: int = 0
    fetched: int = 0  # batches taken from the current iterator


def _length(loader: DataLoader) -> int | None:
    try:
        return len(loader)
    except TypeError:  # an IterableDataset without __len__
        return None


def _batch_size(loader: DataLoader) -> int | None:
    size = loader.batch_size
    if size is None:  # a batch_sampler of the script's
        size = getattr(loader.batch_sampler, "batch_size", None)
    return size if isinstance(size, int) else None


class Feed:
    """The script's data loaders, seen from outside."""

    def __init__(self, start_epoch: int | None) -> None:
        self.start_epoch = start_epoch or 0
        self._loaders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.last: _Loader | None = None  # the loader that yielded the last batch

    def install(self) -> None:
        feed = self
        orig_iter = DataLoader.__iter__
        orig_next = _BaseDataLoaderIter.__next__
        if getattr(orig_iter, "_elastic", False):
            return

        def __iter__(self):
            it = orig_iter(self)
            state = feed._loaders.get(self)
            if state is None:
                state = _Loader(_batch_size(self), _length(self), self.sampler)
                feed._loaders[self] = state
            state.iterations += 1
            state.fetched = 0
            with contextlib.suppress(AttributeError):
                it._elastic_feed = state
            return it

        def __next__(self):
            batch = orig_next(self)
            state = getattr(self, "_elastic_feed", None)
            if state is not None:
                state.fetched += 1
                feed.last = state
            return batch

        __iter__._elastic = True
        DataLoader.__iter__ = __iter__
        _BaseDataLoaderIter.__next__ = __next__

    def epoch(self) -> int | None:
        state = self.last
        if state is None:
            return None
        epoch = getattr(state.sampler, "epoch", None)
        if isinstance(epoch, int):
            return epoch
        return self.start_epoch + state.iterations - 1

    def step_in_epoch(self) -> int | None:
        return None if self.last is None else self.last.fetched

    def steps_per_epoch(self) -> int | None:
        return None if self.last is None else self.last.length

    def batch_size(self) -> int | None:
        """The batch of one rank, as the script's loader gives it (None when unknown)."""
        return None if self.last is None else self.last.batch_size
