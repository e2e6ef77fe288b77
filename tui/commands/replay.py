"""`osmosis-tui replay`: its flags, and a recorded run played back on the dashboard."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tui.commands import exit_codes
from tui.commands.argument_types import finite
from tui.commands.usage import UsageError


def add_replay(commands: Any) -> None:
    replay = commands.add_parser(
        "replay",
        help="play a recorded run back on the dashboard (read-only)",
        description="Replay a run on the dashboard, from its folder (its transitions.jsonl, or "
        "an official run's events.jsonl and logs.txt): p pauses, . steps one event, , steps "
        "back, : jumps to a time, < and > to the start and the end, + and - change the speed.",
    )
    replay.add_argument("transitions", type=Path, help="RUN_DIR, or RUN_DIR/transitions.jsonl")
    replay.add_argument("--speed", type=finite, default=1.0, help="playback speed")
    replay.set_defaults(handler=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    from tui.sources.replay import ReplayError, ReplaySource

    path: Path = args.transitions
    if args.speed <= 0:
        raise UsageError(f"--speed must be greater than 0, got {args.speed}")
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    try:
        source = ReplaySource(path, speed=args.speed)
    except ReplayError as exc:
        raise UsageError(str(exc)) from None
    from tui.app import create_app

    create_app(source, clock=source.clock, export_dir=source.folder).run()
    # Said once the screen is back: lines of the recording that could not be played.
    for warning in source.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return exit_codes.OK
