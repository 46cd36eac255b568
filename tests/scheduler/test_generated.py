"""The files made from the route table and the models are current: the OpenAPI document the
server ships and the front end's API types (``scheduler/port/generate.py``)."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.models import JobView
from jupyter_elastic_gpu.scheduler.port import generate, openapi, typescript


def test_the_generated_files_are_current():
    stale = [str(p.relative_to(generate.TYPES_FILE.parents[2])) for p in generate.stale()]
    assert not stale, f"{', '.join(stale)}: stale; run `{generate.COMMAND}` and commit the result"


def test_the_document_is_valid_openapi():
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(openapi.document())


def test_every_route_model_and_error_is_in_the_document():
    doc = openapi.document()
    schemas = doc["components"]["schemas"]
    assert {m.__name__ for m in openapi.models()} <= set(schemas)
    refs = {r for op in _operations(doc) for r in _refs(op)}
    for ref in refs:  # every reference resolves
        section, name = ref.split("/")[-2:]
        assert name in doc["components"][section], ref


def _operations(doc):
    yield from doc["paths"].values()
    yield doc["components"]


def _refs(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_typescript_of_the_schema_subset():
    t = typescript.type_of
    assert t({"type": "array", "items": {"$ref": "#/components/schemas/JobView"}}) == "JobView[]"
    assert t({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string | null"
    assert t({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}) == (
        "(number | null)[]"
    )
    assert t({"enum": ["a", "b'c"]}) == "'a' | 'b\\'c'"
    assert t({"const": "delta"}) == "'delta'"
    assert t({"type": "object", "additionalProperties": {"type": "number"}}) == (
        "Record<string, number>"
    )
    assert t({"type": "object"}) == "Record<string, unknown>"
    assert t({}) == "unknown"
    lines = typescript.declaration("Job", JobView.model_json_schema())
    assert lines[0].startswith("/** A job as its owner")
    assert "  id: string;" in lines and "  held?: boolean;" in lines
    assert "  progress: JobProgress | null;" in lines
