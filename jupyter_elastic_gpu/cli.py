"""`jupyter-elastic-gpu` (also `jupyter elastic-gpu`): one entry point, one sub-command a task.

Errors a user can fix (a bad file, a wrong option) end with one line on stderr and an exit
status of ``errors.ExitCode`` (2 for usage), never a traceback. A wrong option of a
sub-command is answered with that sub-command's usage, not the top-level one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._version import __version__
from .commands import add_client_commands
from .doctor import add_doctor
from .errors import ExitCode, exit_codes_text
from .hub.demo import add_hub_demo
from .kernels.specs import add_kernelspec
from .options import Parser
from .sim.commands import add_simulate, add_workload

#: The sub-command that runs the shared scheduler: a Jupyter application with its own options.
SCHEDULER = "scheduler"
#: The sub-command JupyterHub starts as its ``elastic-gpu`` service (``hub/service.py``).
HUB_SERVICE = "hub-service"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="jupyter-elastic-gpu",
        description="Elastic, adaptive GPU scheduling for shared Jupyter GPU servers.",
        epilog=exit_codes_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_simulate(sub)
    add_workload(sub)
    sub.add_parser(
        SCHEDULER,
        help="run the shared scheduler of this box (`scheduler --help-all` lists its options)",
        add_help=False,
    )
    sub.add_parser(
        HUB_SERVICE,
        help="run the scheduler as a JupyterHub service (started by the Hub: "
        "examples/jupyterhub_config.py)",
        add_help=False,
    )
    add_hub_demo(sub)
    add_client_commands(sub)
    add_doctor(sub)
    add_kernelspec(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [SCHEDULER]:
        from .server.daemon import main as scheduler

        scheduler(argv[1:])
        return 0
    if argv[:1] == [HUB_SERVICE]:
        from .hub.service import main as hub_service

        hub_service(argv[1:])
        return 0
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the sub-command's own usage (argparse would show the top-level one)
        subcommand(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return args.func(args)
    except (ValueError, OSError) as e:  # TraceError is a ValueError
        print(f"jupyter-elastic-gpu {args.command}: error: {e}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the sub-command ``name`` (``parser`` itself if there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return parser


if __name__ == "__main__":
    sys.exit(main())
