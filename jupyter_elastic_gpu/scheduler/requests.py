"""Validation of what clients send, at the edge: a bad request never reaches the scheduler.

Messages say what was wrong and what to do, in one sentence, because they end up in a
notebook cell's output or a terminal.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

NAME = re.compile(r"^[\w.\- ]{1,80}$")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
MAX_SCRIPT_BYTES = 1_000_000
MAX_INPUT_BYTES = 200_000_000


class BadRequest(ValueError):
    """A request that cannot be honoured as sent (HTTP 400)."""


class SyntheticSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    work: float = Field(gt=0, description="samples to process in total")
    throughput: dict[int, float] = Field(description="samples/s at each GPU count")
    time_scale: float = Field(1.0, gt=0, description="how much faster than real time")
    batch: int = Field(32, ge=1)

    @model_validator(mode="after")
    def _points(self) -> SyntheticSpec:
        if not self.throughput:
            raise ValueError("throughput needs at least one GPUS: SAMPLES_PER_S point")
        for gpus, speed in self.throughput.items():
            if gpus < 1 or speed <= 0:
                raise ValueError(
                    f"throughput point {gpus}: {speed} is invalid: GPU counts from 1, speeds above 0"
                )
        return self


class SubmitRequest(BaseModel):
    """The body of ``POST jobs`` (docs/api.md)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    kind: Literal["script", "synthetic"] = "script"
    script: str | None = None
    args: list[str] = Field(default_factory=list)
    cwd: str | None = None
    min_gpus: int = Field(1, ge=1)
    max_gpus: int | None = Field(None, ge=1)
    gpus: int | None = Field(None, ge=1, description="requested count (default: min_gpus)")
    epochs: int | None = Field(None, ge=1)
    priority: float = Field(1.0, gt=0, le=100)
    batch_policy: Literal["keep-global", "keep-per-replica"] = "keep-global"
    simulated: bool | None = None
    inputs: dict[str, str] = Field(default_factory=dict)
    synthetic: SyntheticSpec | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SubmitRequest:
        if self.name is not None and not NAME.match(self.name):
            raise ValueError("name must be 1-80 letters, digits, spaces, '.', '_' or '-'")
        if self.max_gpus is None:
            self.max_gpus = max(self.min_gpus, self.gpus or self.min_gpus)
        if self.min_gpus > self.max_gpus:
            raise ValueError(
                f"min_gpus ({self.min_gpus}) is above max_gpus ({self.max_gpus}): ask for a "
                f"range such as min_gpus {self.max_gpus}, max_gpus {self.min_gpus}"
            )
        if self.gpus is not None and not self.min_gpus <= self.gpus <= self.max_gpus:
            raise ValueError(
                f"gpus ({self.gpus}) must lie between min_gpus ({self.min_gpus}) and "
                f"max_gpus ({self.max_gpus})"
            )
        if self.kind == "script":
            if not self.script or not self.script.strip():
                raise ValueError("a script job needs the training code in 'script'")
            if len(self.script.encode()) > MAX_SCRIPT_BYTES:
                raise ValueError(
                    "the script is larger than 1 MB: put the code in a file and import it"
                )
            if self.synthetic is not None:
                raise ValueError("'synthetic' only goes with kind 'synthetic'")
        elif self.synthetic is None:
            raise ValueError("a synthetic job needs 'synthetic': {work, throughput}")
        for name, blob in self.inputs.items():
            if not IDENTIFIER.match(name):
                raise ValueError(f"input name {name!r} is not a Python identifier")
            if len(blob) > MAX_INPUT_BYTES:
                raise ValueError(f"input {name!r} is larger than 150 MB: save it to a file instead")
        return self


def parse_submit(body: object) -> SubmitRequest:
    """A validated submit request, or BadRequest with one readable sentence."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object (docs/api.md lists its fields)")
    try:
        return SubmitRequest.model_validate(body)
    except ValidationError as e:
        raise BadRequest(describe(e)) from None


def describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"])
        msg = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            msg = "unknown field (docs/api.md lists the fields)"
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)
