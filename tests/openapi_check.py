"""Checking documents against ``server/openapi.yaml``: shared by the OpenAPI tests
(tests/scheduler/test_openapi.py) and the adversarial suite (tests/adversarial), which both
validate every answer a real server gives under the schema declared for its route and status.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
DOC_URI = "urn:jupyter-elastic-gpu:openapi"


@cache
def document() -> dict:
    """The document as the installed package ships it."""
    text = (files("jupyter_elastic_gpu.server") / "openapi.yaml").read_text()
    return yaml.safe_load(text)


@cache
def registry() -> Registry:
    resource = Resource.from_contents(document(), default_specification=DRAFT202012)
    return Registry().with_resource(DOC_URI, resource)


@cache
def _validator(pointer: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": DOC_URI + pointer},
        registry=registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def validate(instance, pointer: str) -> None:
    """Validate against the schema at ``pointer`` (e.g. ``#/components/schemas/Job``)."""
    errors = sorted(_validator(pointer).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]
        raise AssertionError(f"not valid under {pointer}:\n" + "\n".join(lines[:10]))


def response_pointer(template: str, method: str, status: int) -> str:
    """Pointer to the JSON schema the document declares for one answer (fails if undeclared)."""
    operation = document()["paths"][template][method]
    declared = operation["responses"]
    assert str(status) in declared, (
        f"{method.upper()} {template} answered {status}, which the document does not declare "
        f"(declared: {', '.join(sorted(declared))})"
    )
    response = declared[str(status)]
    base = f"#/paths/{_escape(template)}/{method}/responses/{status}"
    if "$ref" in response:
        base = response["$ref"]
    return base + "/content/application~1json/schema"


def validate_answer(payload, template: str, method: str, status: int) -> None:
    """``payload`` is what the document declares ``method template`` answers with ``status``."""
    validate(payload, response_pointer(template, method.lower(), status))


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def documented() -> set[tuple[str, str]]:
    """(path template, method) for every operation of the document."""
    return {
        (path, method)
        for path, item in document()["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }
