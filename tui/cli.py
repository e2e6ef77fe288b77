"""The `osmosis-tui` command: the top-level parser, its subcommands (`tui.commands`), the exit
status. Heavy imports happen inside the subcommands so `--help` is quick."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tui.commands import exit_codes
from tui.commands.attach import add_attach
from tui.commands.compare import add_compare
from tui.commands.eval_command import add_eval
from tui.commands.eval_flags import OUTPUT_FLAGS
from tui.commands.parser import CommandParser
from tui.commands.replay import add_replay
from tui.commands.report import add_report
from tui.commands.runs import add_runs
from tui.commands.serve import add_serve
from tui.commands.std_streams import forgiving_std_streams
from tui.commands.usage import PROGRAM, UsageError
from tui.commands.watch import add_watch

#: The distribution whose version `--version` prints (its metadata, as pip installed it).
DISTRIBUTION = "osmosis-tui"


class _PrintVersion(argparse.Action):
    """`--version`: the installed distribution's version, looked up only when asked (reading
    package metadata would slow down every other command)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version(DISTRIBUTION)
        except PackageNotFoundError:
            parser.exit(
                exit_codes.NOT_DONE,
                f"{parser.prog}: the {DISTRIBUTION} distribution is not installed\n",
            )
        print(f"{parser.prog} {installed}")
        parser.exit(exit_codes.OK)


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROGRAM,
        description="Watch and steer Osmosis rollouts: eval runs with a live dashboard, "
        "and an embedded rollout server.",
    )
    parser.add_argument("--version", action=_PrintVersion, help="print the version and exit")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--json",
        action="store_true",
        help="eval: print the end of the run as JSON; runs: the list; compare: the comparison "
        "(anywhere)",
    )
    modes.add_argument(
        "--plain", action="store_true", help="eval, compare: print it as plain text (anywhere)"
    )
    # Not required=True: a missing command is reported after the arguments nobody takes, so
    # that `osmosis-tui --verison` is answered as a typo (see main).
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_eval(commands)
    add_serve(commands)
    add_replay(commands)
    add_report(commands)
    add_attach(commands)
    add_runs(commands)
    add_compare(commands)
    add_watch(commands)
    parser.commands = commands.choices
    return parser


def _hoist_output_flags(argv: Sequence[str]) -> list[str]:
    """`argv` with `--json` and `--plain` moved before the subcommand: they are accepted on
    either side of it, and the top-level parser is the one that reads them."""
    words = list(argv)
    end = words.index("--") if "--" in words else len(words)
    head, tail = words[:end], words[end:]
    hoisted = [word for word in head if word in OUTPUT_FLAGS]
    return [*hoisted, *(word for word in head if word not in OUTPUT_FLAGS), *tail]


def main(argv: Sequence[str] | None = None) -> NoReturn:
    # A reader that goes away (`| head`) ends no command in a traceback, `--help` included:
    # each one alike.
    with forgiving_std_streams():
        status = _parsed_and_run(sys.argv[1:] if argv is None else argv)
    sys.exit(status)


def _parsed_and_run(argv: Sequence[str]) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(_hoist_output_flags(argv))
    if unknown:
        # Left over by the subcommand's parser, when there is a subcommand: its flags are
        # the ones to suggest.
        parser.commands.get(args.command, parser).reject_unknown(unknown)
    if args.command is None:
        parser.error(f"missing COMMAND ({', '.join(parser.commands)})")
    return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    try:
        if (args.json and args.command not in ("eval", "runs", "compare")) or (
            args.plain and args.command not in ("eval", "compare")
        ):
            raise UsageError(
                "--json shapes what `eval`, `runs` and `compare` print, --plain what `eval` "
                "and `compare` print; leave them out here"
            )
        status: int = args.handler(args)
    except UsageError as exc:
        print(f"osmosis-tui {args.command}: {exc}", file=sys.stderr)
        status = exit_codes.BAD_INPUT
    except KeyboardInterrupt:
        status = exit_codes.INTERRUPTED
    return status
