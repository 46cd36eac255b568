"""The policies, by name. ``make_policy("adaptive")`` is what every driver calls."""

from __future__ import annotations

from .adaptive import AdaptivePolicy
from .adaptive_params import AdaptiveParams
from .base import Policy
from .elas import ElasPolicy
from .optimus import OptimusPolicy
from .srtf import SrtfPolicy
from .static import StaticPolicy
from .tiresias import TiresiasPolicy

POLICIES: dict[str, type] = {
    cls.name: cls
    for cls in (AdaptivePolicy, StaticPolicy, TiresiasPolicy, OptimusPolicy, ElasPolicy, SrtfPolicy)
}


class UnknownPolicy(ValueError):
    pass


def make_policy(name: str, **params) -> Policy:
    try:
        cls = POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise UnknownPolicy(f"unknown policy '{name}' (known: {known})") from None
    return cls(**params)


__all__ = ["POLICIES", "AdaptiveParams", "AdaptivePolicy", "Policy", "UnknownPolicy", "make_policy"]
