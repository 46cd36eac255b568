"""What every model of the API shares: bounded field types, the two kinds of model (strict for
what people send, lenient for what a sidecar of another version may send), and turning a
validation error into one sentence."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from elastic_gpu_sidecar.protocol import MAX_GPU_ID_CHARS, check_gpu_id
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ..errors import BadRequest

NAME = re.compile(r"^(?=.*\S)[\w.\- ]{1,80}$")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w{0,99}$")
MAX_SCRIPT_BYTES = 1_000_000
MAX_INPUT_BYTES = 200_000_000
#: More GPUs than any box or job has: bounds every count a client sends.
MAX_GPUS = 4096
MAX_PID = 2**22  # Linux's pid_max ceiling
MAX_TEXT = 100_000  # longest free text kept from a sidecar (a traceback)

GpuId = Annotated[str, Field(max_length=MAX_GPU_ID_CHARS), AfterValidator(check_gpu_id)]
GpuIds = Annotated[list[GpuId], Field(max_length=MAX_GPUS)]
GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS)]
Seconds = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=2**53)]
Amount = Annotated[float, Field(ge=0, le=1e18, allow_inf_nan=False)]
Value = Annotated[float, Field(ge=-1e300, le=1e300, allow_inf_nan=False)]
Pid = Annotated[int, Field(ge=1, le=MAX_PID)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Speeds = Annotated[dict[GpuCount, Amount], Field(max_length=MAX_GPUS)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class Lenient(BaseModel):
    """What a sidecar sends: fields this version does not know are dropped, not refused (a
    sidecar in a user's environment may be a version ahead of the scheduler)."""

    model_config = ConfigDict(extra="ignore")


def parse(model: type[BaseModel], body: object, what: str) -> Any:
    """``body`` validated as ``model``, or BadRequest with one readable sentence."""
    if not isinstance(body, dict):
        raise BadRequest(f"the {what} must be a JSON object (docs/api.md lists its fields)")
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise BadRequest(f"{what}: {describe(e)}") from None


def describe(error: ValidationError, rename: Callable[[str], str] = str) -> str:
    """A pydantic error as one sentence: ``field: what is wrong, got X; ...``; ``rename`` turns
    field names into what the user typed (a CLI flag)."""
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"])
        msg = rename(item["msg"].removeprefix("Value error, "))
        if item["type"] == "extra_forbidden":
            msg = "unknown field (docs/api.md lists the fields)"
        elif isinstance(item.get("input"), (int, float, str)) and item["loc"]:
            value = item["input"]
            msg += f", got {value[:40]!r}" if isinstance(value, str) else f", got {value}"
        parts.append(f"{rename(where)}: {msg}" if where else msg)
    return "; ".join(parts)
