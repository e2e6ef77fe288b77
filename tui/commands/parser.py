"""`CommandParser`, the argparse parser of `osmosis-tui` and of each subcommand: a mistake on
the command line gets a short usage line, the error and where the help is (exit 2), not the
usage of every flag."""

from __future__ import annotations

import argparse
from typing import NoReturn


class CommandParser(argparse.ArgumentParser):
    """An `ArgumentParser` for people: short about mistakes. Subparsers are made of the same
    class (argparse makes them of their parent's), so every subcommand answers alike."""

    def error(self, message: str) -> NoReturn:
        self.exit(
            2, f"{self.format_usage()}{self.prog}: error: {message}\ntry '{self.prog} --help'\n"
        )
