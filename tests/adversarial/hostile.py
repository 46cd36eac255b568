"""Hostile inputs: hypothesis strategies for what a broken or malicious client sends.

Every strategy here produces something to put on the wire: JSON values of every type and
extreme (310-digit integers, 1e308, NaN and Infinity, which Python's json writes and reads as
bare tokens), odd unicode, huge strings and lists, deeply nested documents, bodies that are not
JSON at all, valid requests with one field broken, bad query arguments, bad job ids, and
wrong credentials.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from typing import Any

from hypothesis import strategies as st

#: Numbers at and past every bound the models have, and ones JSON cannot carry faithfully.
EXTREME_NUMBERS: list[Any] = [
    10**310,
    -(10**310),
    int("9" * 4000),
    1e308,
    -1e308,
    math.nan,
    math.inf,
    -math.inf,
    5e-324,
    -5e-324,
    1e-300,
    -0.0,
    0,
    -1,
    1,
    1.5,
    4096,
    4097,
    2**31,
    2**53,
    2**53 + 1,
    2**63,
    2**64,
    -(2**63) - 1,
    1e15,
    1e18,
    1e300,
    True,
    False,
]

ODD_STRINGS = [
    "",
    " ",
    "\x00",
    "\ud800",  # a lone surrogate: json writes it as an escape, Python reads it back as is
    "\u202eevil",
    "🙂" * 3,
    "é",
    "ＡＢ１",
    "५",
    "../../../etc/passwd",
    "/dev/zero",
    "NaN",
    "Infinity",
    "1e309",
    "0x10",
    "null",
    "'; DROP TABLE jobs; --",
    "<script>alert(1)</script>",
    "\r\nX-Injected: 1",
    "${HOME}{user}%s%n",
    "a" * 5000,
]

FIELD_NAMES = [
    "name", "kind", "script", "args", "cwd", "min_gpus", "max_gpus", "requested_gpus",
    "epochs", "priority", "batch_policy", "measure_noise", "framework", "simulated", "inputs",
    "synthetic", "work", "noise_scale", "grad_var",
    "throughput", "time_scale", "batch", "job_id", "generation", "gpus", "state", "progress",
    "resize_cost_s", "backlog", "sidecar_pid", "trainer_pid", "restarts", "error", "exit_code",
    "model_path", "t", "samples", "samples_per_s", "metrics", "loss", "__proto__", "",
]  # fmt: skip


def nested_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"a": value}
    return value


#: Values too big to draw at random, made afresh for each draw (a drawn value may be changed
#: by a later mutation of the same document).
BIG_VALUES = [
    lambda: "x" * 300_000,
    lambda: [0] * 100_000,
    lambda: {str(i): i for i in range(20_000)},
    lambda: nested_list(900),  # deep, yet under the parser's recursion limit: the models see it
    lambda: nested_dict(900),
]
big_values = st.sampled_from(BIG_VALUES).map(lambda make: make())

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(EXTREME_NUMBERS),
    st.sampled_from(ODD_STRINGS),
)

json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8)), inner, max_size=4
        ),
    ),
    max_leaves=12,
)

#: One value to put where a field goes: mostly wrong, sometimes huge.
hostile_values = st.one_of(
    st.sampled_from(EXTREME_NUMBERS),
    st.sampled_from(ODD_STRINGS),
    json_values,
    big_values,
)

DEEP_LISTS = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECTS = b'{"a":' * 100_000 + b"0" + b"}" * 100_000

RAW_BODIES = [
    b"",
    b"not json",
    b"{",
    b'{"min_gpus": 1,',
    DEEP_LISTS,
    DEEP_OBJECTS,
    b'{"progress": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b"\xff\xfe\x00",
    b"\xef\xbb\xbf{}",
    '{"kind": "synthetic"}'.encode("utf-16"),
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1" * 5000,  # past Python's 4300-digit limit for int()
    b'{"min_gpus": ' + b"1" * 5000 + b"}",
    b'{"synthetic": {"work": 1e400, "throughput": {"1": 1e400}}, "kind": "synthetic"}',
    b'{"throughput": {"1": NaN}, "progress": {"t": Infinity}}',
    b"null",
    b"[]",
    b"true",
    b'"a string"',
    b"\x00" * 64,
    b'{"a": 1, "a": 2}',
    b'{"\\ud800": "\\udfff"}',
    b" " * (1024 * 1024 + 1),  # past the 1 MB every route but POST jobs takes
]

raw_bodies = st.one_of(st.sampled_from(RAW_BODIES), st.binary(max_size=64))


def paths_of(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value in ``doc`` (dict keys and list indices)."""
    out = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.append((*prefix, key))
            out.extend(paths_of(value, (*prefix, key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out.append((*prefix, i))
            out.extend(paths_of(value, (*prefix, i)))
    return out


def _apply(doc: Any, path: tuple, op: str, value: Any, extra_key: str) -> None:
    *parents, last = path
    target = doc
    for p in parents:
        target = target[p]
    if op == "delete" and isinstance(target, dict):
        target.pop(last, None)
    elif op == "extra" and isinstance(target, dict):
        target[extra_key] = value
    else:
        target[last] = value


def like(value: Any) -> st.SearchStrategy[Any]:
    """Wrong values of the right JSON type for where ``value`` was: a field's bounds are where
    its model is tested hardest."""
    if value is None:
        return hostile_values
    if isinstance(value, bool):
        return st.sampled_from([0, 1, "true", None])
    if isinstance(value, (int, float)):
        return st.one_of(
            st.sampled_from(EXTREME_NUMBERS),
            st.floats(),
            st.integers(),
            st.just(value).map(lambda v: -v),
        )
    if isinstance(value, str):
        return st.one_of(st.sampled_from(ODD_STRINGS), st.text(max_size=50))
    if isinstance(value, list):
        return st.lists(hostile_values, max_size=5)
    return st.dictionaries(
        st.sampled_from([*FIELD_NAMES, "0", "-1", "1" + "0" * 310]), hostile_values, max_size=5
    )


def _at(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def broken(draw: st.DrawFn, base: dict) -> dict:
    """``base`` (a valid request) with one to three of its fields replaced by hostile values,
    removed, or joined by unknown ones (never inside a value put there by an earlier one)."""
    doc = copy.deepcopy(base)
    paths = paths_of(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "extra"]))
        key = draw(st.sampled_from([*FIELD_NAMES, "colour"]))
        value = draw(st.one_of(hostile_values, like(_at(base, path))))
        # (an earlier change may have removed or replaced what this path leads through)
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _apply(doc, path, op, value, key)
    return doc


#: Numbers at the edges of what the models accept: valid requests that push every sum,
#: product and quotient the scheduler computes from them to its limits.
INT_EDGES = [0, 1, 4096, 2**31, 2**53 - 1, 2**53]
FLOAT_EDGES = [0.0, 5e-324, 1e-300, 1e-9, 1e15, 1e18, 1e300]


def model_bounds(model: Any) -> dict[tuple, list]:
    """{path of a number: its declared minimum and maximum} of a pydantic model, ``"*"``
    standing for any key of a mapping (the throughput's GPU counts)."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    out: dict[tuple, list] = {}

    def walk(node: dict, path: tuple) -> None:
        node = defs[node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node
        for option in node.get("anyOf", []):
            walk(option, path)
        bounds = [node[k] for k in ("minimum", "maximum") if k in node]
        if bounds:
            out.setdefault(path, []).extend(bounds)
        for key, sub in node.get("properties", {}).items():
            walk(sub, (*path, key))
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], (*path, "*"))
        if isinstance(node.get("items"), dict):
            walk(node["items"], (*path, "*"))

    walk(schema, ())
    return out


def _declared(bounds: dict | None, path: tuple) -> list:
    """The bounds ``model_bounds`` found for ``path`` (list items and mapping keys as ``*``)."""
    general = tuple("*" if isinstance(p, int) else p for p in path)
    bounds = bounds or {}
    return bounds.get(general) or bounds.get((*general[:-1], "*")) or []


@st.composite
def at_the_edges(draw: st.DrawFn, base: dict, bounds: dict | None = None) -> dict:
    """``base`` with numbers moved to the edges of what is valid, in one of three ways: one or
    two of them (or a GPU count of its throughput), few enough that the request is often
    accepted as it is; every fractional one at an edge, which no single field's bounds
    refuse; or every one at its declared minimum or maximum, which is valid by construction
    and pushes every sum and product the server makes of them to its limit at once."""
    doc = copy.deepcopy(base)
    numbers = [
        p for p in paths_of(base) if type(_at(base, p)) in (int, float) or p[-1] == "throughput"
    ]
    mode = draw(st.integers(0, 2))
    if mode == 0:
        for path in (p for p in numbers if type(_at(base, p)) is float):
            _apply(doc, path, "replace", draw(st.sampled_from(FLOAT_EDGES)), "")
        return doc
    if mode == 1:
        for path in numbers:
            declared = _declared(bounds, path)
            if declared and not isinstance(_at(base, path), dict):
                _apply(doc, path, "replace", draw(st.sampled_from(declared)), "")
        return doc
    for path in draw(st.lists(st.sampled_from(numbers), min_size=1, max_size=2, unique=True)):
        value = _at(base, path)
        declared = _declared(bounds, path)
        if isinstance(value, dict):  # a throughput: a count at the edges
            key = draw(st.sampled_from(["1", "4096", "4097", "0"]))
            declared = _declared(bounds, (*path, key))
            _apply(doc, (*path, key), "replace", draw(st.sampled_from(FLOAT_EDGES + declared)), "")
        else:
            edges = INT_EDGES if isinstance(value, int) else FLOAT_EDGES
            if declared and draw(st.booleans()):
                edges = declared  # the field's own bounds, half the time
            _apply(doc, path, "replace", draw(st.sampled_from(edges)), "")
    return doc


def encode(doc: Any) -> bytes:
    """JSON as Python writes it: NaN and Infinity as bare tokens, lone surrogates escaped."""
    return json.dumps(doc).encode()


def bodies(valid: list[dict], edges: int = 1, model: Any = None) -> st.SearchStrategy[bytes]:
    """Request bodies: broken variants of the ``valid`` ones, valid ones at the edges (drawn
    ``edges`` times as often; at the bounds ``model`` declares too), any JSON, or no JSON."""
    bounds = model_bounds(model) if model is not None else None
    kinds = [
        st.sampled_from(valid).flatmap(broken).map(encode),
        st.sampled_from(valid).flatmap(lambda b: at_the_edges(b, bounds)).map(encode),
        st.sampled_from(valid).map(encode),
        json_values.map(encode),
        raw_bodies,
    ]
    # one_of would merge repeated strategies: weigh by the index drawn instead
    weighted = [0, *[1] * edges, 2, 3, 4]
    return st.sampled_from(weighted).flatmap(lambda i: kinds[i])


#: Values for ``tail``, ``since`` and ``timeout``.
QUERY_VALUES = [
    "", "0", "-1", "3", "1e309", "-1e309", "nan", "NaN", "inf", "-Infinity", "1" * 400,
    "1" * 5000, "0x10", "1_000", " 7 ", "５", "1e-400", "-0", "abc", "\x00", "[1]", "1,2",
    "9" * 30, "-" + "9" * 30, "\ud800",
]  # fmt: skip

query_args = st.lists(
    st.tuples(
        st.sampled_from(["tail", "since", "timeout", "x", "_xsrf"]),
        st.one_of(
            st.sampled_from(QUERY_VALUES),
            st.text(max_size=12),
            st.floats().map(repr),
            st.integers().map(str),
        ),
    ),
    max_size=3,
)

#: Job ids for paths: each is percent-encoded on the wire. Ids outside the route pattern
#: reach no route of the API.
BAD_JOB_IDS = [
    "j-0000000000",
    "j" * 64,
    "j" * 65,
    "..",
    "a/b",
    "a b",
    "%2e%2e",
    "j-é",
    "\x00",
    "-",
    "_" * 10,
    "j-0000000000?x=1",
    "j-0000000000#x",
    "🙂",
]

#: Credentials for the Jupyter routes: (how, value); the harness turns each into headers.
AUTH_KINDS = [
    "valid", "valid", "valid", "valid", "valid", "valid", "none", "empty", "wrong",
    "scheme-only", "bearer", "upper-scheme", "query", "wrong-query", "double", "junk-after",
    "cookie", "long",
]  # fmt: skip
