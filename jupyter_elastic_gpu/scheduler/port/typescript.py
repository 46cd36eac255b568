"""The API's JSON schemas as TypeScript types, for the JupyterLab extension.

A small translation of the subset the models produce: objects (required and optional
fields, ``additionalProperties`` as an index signature), enums and constants, arrays,
``anyOf``/``oneOf`` (``null`` among them), ``$ref`` to another schema. Each schema becomes
an ``interface`` (an object) or a ``type`` (anything else) of its name, with its description
as the doc comment, so that the front end's types change when a model does. The output is
formatted as prettier formats it (``labextension/package.json``).
"""

from __future__ import annotations

import json
import re
from typing import Any

WIDTH = 100
_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")
_PRIMITIVES = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return json.dumps(value)


def _union(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    if "unknown" in unique:
        return "unknown"
    return " | ".join(unique) if unique else "never"


def _element(type_: str) -> str:
    """``type_`` as an array's element (a union needs parentheses)."""
    return f"({type_})[]" if " | " in type_ or " & " in type_ else f"{type_}[]"


def type_of(schema: Any) -> str:
    """The TypeScript type of ``schema`` (inline: an object without a name is a literal)."""
    if schema is True or schema == {}:
        return "unknown"
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    if "const" in schema:
        return _literal(schema["const"])
    if "enum" in schema:
        return _union([_literal(v) for v in schema["enum"]])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _union([type_of(s) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([type_of({**schema, "type": k}) for k in kind])
    if kind == "null":
        return "null"
    if kind == "array":
        return _element(type_of(schema.get("items", {})))
    if kind == "object" or "properties" in schema:
        if not schema.get("properties"):
            extra = schema.get("additionalProperties", True)
            return (
                "Record<string, unknown>" if extra is True else f"Record<string, {type_of(extra)}>"
            )
        body = "; ".join(
            f"{_key(k)}{_optional(k, schema)}: {type_of(v)}"
            for k, v in schema["properties"].items()
        )
        return "{ " + body + " }"
    return _PRIMITIVES.get(kind, "unknown")


def _key(name: str) -> str:
    return name if _IDENTIFIER.match(name) else _literal(name)


def _optional(name: str, schema: dict[str, Any]) -> str:
    return "" if name in schema.get("required", ()) else "?"


def _doc(text: str | None, indent: str = "") -> list[str]:
    """A doc comment of ``text`` wrapped to the width (prettier leaves comments as they are)."""
    if not text:
        return []
    words = " ".join(text.replace("*/", "* /").split()).split(" ")
    room = WIDTH - len(indent) - 3
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > room:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    if len(lines) == 1 and len(indent) + 7 + len(lines[0]) <= WIDTH:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {t}" for t in lines), f"{indent} */"]


def _alias(name: str, type_: str) -> list[str]:
    head = f"export type {name} ="
    if len(head) + 1 + len(type_) + 1 <= WIDTH:
        return [f"{head} {type_};"]
    parts = type_.split(" | ")
    if len(parts) > 1 and all(" | " not in p for p in parts):
        if len("  " + type_ + ";") <= WIDTH:
            return [head, f"  {type_};"]
        return [head, *(f"  | {p}" for p in parts[:-1]), f"  | {parts[-1]};"]
    return [head, f"  {type_};"]


def _property(name: str, schema: dict[str, Any], required: bool) -> list[str]:
    head = f"  {_key(name)}{'' if required else '?'}:"
    type_ = type_of(schema)
    lines = _doc(schema.get("description"), "  ")
    parts = type_.split(" | ")
    if len(head) + 1 + len(type_) + 1 <= WIDTH or len(parts) == 1:
        return [*lines, f"{head} {type_};"]
    return [*lines, head, *(f"    | {p}" for p in parts[:-1]), f"    | {parts[-1]};"]


def declaration(name: str, schema: dict[str, Any]) -> list[str]:
    """``export interface`` (an object with fields) or ``export type`` for schema ``name``."""
    lines = _doc(schema.get("description"))
    props = schema.get("properties")
    if not props:
        return [*lines, *_alias(name, type_of(schema))]
    lines.append(f"export interface {name} {{")
    required = set(schema.get("required", ()))
    for key, prop in props.items():
        lines += _property(key, prop, key in required)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        lines.append(f"  [key: string]: {type_of(extra)};")
    lines.append("}")
    return lines


def module(schemas: dict[str, Any], command: str) -> str:
    """A TypeScript module declaring every schema of ``schemas``, made by ``command``."""
    out = [
        "/**",
        " * The REST API's types, generated from the scheduler's models (the schemas of",
        " * jupyter_elastic_gpu/server/openapi.yaml) by `" + command + "`: do not edit; change",
        " * the models (jupyter_elastic_gpu/models/) and run it again.",
        " */",
    ]
    for name, schema in schemas.items():
        out += ["", *declaration(name, schema)]
    return "\n".join(out) + "\n"
