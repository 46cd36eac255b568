"""``python -m jupyter_elastic_gpu.scheduler.port.generate``: write the files made from the
route table and the models (``make generate``), or, with ``--check``, fail when one is stale.

* ``jupyter_elastic_gpu/server/openapi.yaml``: the OpenAPI document (``openapi.py``);
* ``labextension/src/api-types.ts``: the front end's types of the same schemas
  (``typescript.py``).

Run it after changing a model or a route: the tests fail while a committed file differs from
what this writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from . import openapi, typescript

#: This command, as the generated files and the staleness tests name it.
COMMAND = "make generate"
_PACKAGE = Path(__file__).resolve().parents[2]
OPENAPI_FILE = _PACKAGE / "server" / "openapi.yaml"
TYPES_FILE = _PACKAGE.parent / "labextension" / "src" / "api-types.ts"


class _Dumper(yaml.SafeDumper):
    """Block style for text of several lines, so the document reads as written."""


def _text(dumper: yaml.SafeDumper, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def openapi_text() -> str:
    header = f"# Generated from the route table and the models by `{COMMAND}`: do not edit.\n"
    body = yaml.dump(
        openapi.document(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100
    )
    return header + body


def types_text() -> str:
    return typescript.module(openapi.schemas(), COMMAND)


def outputs() -> dict[Path, str]:
    """Each generated file and what it must hold (the types only in a checkout: a wheel has
    no labextension sources)."""
    out = {OPENAPI_FILE: openapi_text()}
    if TYPES_FILE.parent.is_dir():
        out[TYPES_FILE] = types_text()
    return out


def stale() -> list[Path]:
    """The generated files that differ from what would be generated now."""
    return [
        path
        for path, text in outputs().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say which files are stale")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for path in old:
            print(f"stale: {path} (run `{COMMAND}`)", file=sys.stderr)
        return 1 if old else 0
    for path, text in outputs().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
