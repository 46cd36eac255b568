"""Take over Lightning's ``Trainer`` before the script runs: its ``__init__`` (the grant's
devices, ``grant.py``), its ``fit`` (``Runtime.fit``), and the step where Lightning makes the
training ``DataLoader`` of a rank (``FitSession.elastic_loader``).

``lightning.pytorch`` and the older ``pytorch_lightning`` are two copies of the same code, each
with its own classes: whichever the script uses is taken over the same way.
"""

from __future__ import annotations

import functools
import importlib

from .. import torchdist
from .grant import grant_kwargs
from .runtime import Runtime


def _wrap(cls, name: str, make) -> None:
    orig = getattr(cls, name)
    if getattr(orig, "_elastic", False):
        return
    new = functools.wraps(orig)(make(orig))
    new._elastic = True
    setattr(cls, name, new)


def install(rt: Runtime, package: str) -> None:
    """Take over ``package`` (``lightning.pytorch`` or ``pytorch_lightning``)."""
    pl = importlib.import_module(package)
    connector = importlib.import_module(f"{package}.trainer.connectors.data_connector")
    strategy_cls = pl.strategies.DDPStrategy

    def make_init(orig):
        def __init__(self, *args, **kwargs):
            new, messages = grant_kwargs(
                kwargs,
                world=rt.replicas,
                simulated=rt.simulated,
                make_strategy=lambda backend: strategy_cls(process_group_backend=backend),
                backend=torchdist.backend(),
                epochs=int(rt.epochs) if rt.epochs else None,
            )
            for message in messages:
                rt.say(message)
                if message not in rt.notes:
                    rt.notes.append(message)
            orig(self, *args, **new)

        return __init__

    def make_fit(orig):
        def fit(self, *args, **kwargs):
            return rt.fit(orig, self, *args, **kwargs)

        return fit

    def make_prepare(orig):
        def _prepare_dataloader(self, dataloader, shuffle, mode):
            out = orig(self, dataloader, shuffle, mode)
            session = rt.session
            if (
                session is None
                or session.trainer is not self.trainer
                or getattr(mode, "value", mode) != "train"
            ):
                return out
            return session.elastic_loader(dataloader, out)

        return _prepare_dataloader

    _wrap(pl.Trainer, "__init__", make_init)
    _wrap(pl.Trainer, "fit", make_fit)
    _wrap(connector._DataConnector, "_prepare_dataloader", make_prepare)
