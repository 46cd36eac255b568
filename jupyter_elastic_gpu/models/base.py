"""What every model of the API shares: bounded field types, the two kinds of model (strict for
what people send, lenient for what a sidecar of another version may send), and turning a
validation error into one sentence."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from elastic_gpu_sidecar.protocol import MAX_GPU_ID_CHARS, check_gpu_id
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from ..core.slices import MAX_PROFILE_CHARS, check_profile
from ..errors import BadRequest

NAME = re.compile(r"^(?=.*\S)[\w.\- ]{1,80}$")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w{0,99}$")
MAX_SCRIPT_BYTES = 1_000_000
MAX_INPUT_BYTES = 200_000_000
#: More GPUs than any box or job has: bounds every count a client sends.
MAX_GPUS = 4096
MAX_PID = 2**22  # Linux's pid_max ceiling
MAX_TEXT = 100_000  # longest free text kept from a sidecar (a traceback)
MAX_NOTEBOOK_CHARS = 1024  # longest notebook path a job records


def at_most(limit: int) -> BeforeValidator:
    """Refuse a collection of more than ``limit`` entries before its entries are validated:
    pydantic checks a dict's length after its items, and one error per item of a huge one
    costs the server far more than the request did."""

    def check(value: Any) -> Any:
        if isinstance(value, (dict, list)) and len(value) > limit:
            raise ValueError(f"at most {limit} entries, got {len(value)}")
        return value

    return BeforeValidator(check)


GpuId = Annotated[str, Field(max_length=MAX_GPU_ID_CHARS), AfterValidator(check_gpu_id)]
GpuIds = Annotated[list[GpuId], Field(max_length=MAX_GPUS)]
GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS)]
#: A MIG profile (``1g.10gb``), lower-cased as NVML names it.
MigProfile = Annotated[
    str, Field(max_length=MAX_PROFILE_CHARS, strict=True), AfterValidator(check_profile)
]
Seconds = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=2**53)]
#: A grant generation a sidecar reports: the scheduler answers one above it, still a Count.
Generation = Annotated[int, Field(ge=0, le=2**53 - 1)]
Amount = Annotated[float, Field(ge=0, le=1e18, allow_inf_nan=False)]
Value = Annotated[float, Field(ge=-1e300, le=1e300, allow_inf_nan=False)]
Pid = Annotated[int, Field(ge=1, le=MAX_PID)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Speeds = Annotated[dict[GpuCount, Amount], Field(max_length=MAX_GPUS), at_most(MAX_GPUS)]
#: A job's priority (its weight in the policy's order): what a submission and an admin's change
#: may set.
Priority = Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class Lenient(BaseModel):
    """What a sidecar sends: fields this version does not know are dropped, not refused (a
    sidecar in a user's environment may be a version ahead of the scheduler)."""

    model_config = ConfigDict(extra="ignore")


def load_json(raw: bytes | str) -> Any:
    """A request body as JSON (``{}`` when empty), or BadRequest: malformed, not UTF-8, nested
    past the parser's recursion limit, or an integer of more digits than Python converts."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"the body is not valid JSON ({str(e)[:200]})") from None


def parse(model: type[BaseModel], body: object, what: str) -> Any:
    """``body`` (a JSON document, or its raw bytes) validated as ``model``, or BadRequest with
    one readable sentence."""
    if isinstance(body, (bytes, bytearray)):
        body = load_json(bytes(body))
    if not isinstance(body, dict):
        raise BadRequest(f"the {what} must be a JSON object (docs/api.md lists its fields)")
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise BadRequest(f"{what}: {describe(e)}") from None


#: What a refused value must be, in the project's voice ("max_gpus: must be at most 4096, got
#: 10000"), by pydantic's error type; its context fills the braces. A type not listed keeps
#: pydantic's own words.
MUST = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be above {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be below {lt}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_too_short": "must be at least {min_length} characters",
    "string_too_long": "must be at most {max_length} characters",
    "too_short": "must have at least {min_length} items",
    "too_long": "must have at most {max_length} items",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "enum": "must be one of {expected}",
    "literal_error": "must be one of {expected}",
    "missing": "is required",
    "extra_forbidden": "unknown field (docs/api.md lists the fields)",
}


def must(item: Mapping[str, Any]) -> str:
    """One pydantic error item's message in the project's voice (``MUST``)."""
    says = MUST.get(item["type"])
    if says is None:
        return str(item["msg"]).removeprefix("Value error, ")
    ctx = {  # 0.0 said as 0
        k: int(v) if isinstance(v, float) and v.is_integer() else v
        for k, v in (item.get("ctx") or {}).items()
    }
    try:
        return says.format(**ctx)
    except (KeyError, IndexError, ValueError):
        return str(item["msg"])


def describe(error: ValidationError, rename: Callable[[str], str] = str) -> str:
    """A pydantic error as one sentence: ``field: what it must be, got X; ...``; ``rename``
    turns field names into what the user typed (a CLI flag)."""
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p)[:80] for p in item["loc"])[:300]
        msg = rename(must(item))[:500]
        if (
            item["type"] != "extra_forbidden"
            and isinstance(item.get("input"), (int, float, str))
            and item["loc"]
        ):
            value = item["input"]
            if isinstance(value, str):
                msg += f", got {value[:40]!r}"
            elif isinstance(value, int) and abs(value) >= 10**40:
                msg += f", got an integer of {len(str(abs(value)))} digits"
            else:
                msg += f", got {value}"
        parts.append(f"{rename(where)}: {msg}" if where else msg)
    return "; ".join(parts)
