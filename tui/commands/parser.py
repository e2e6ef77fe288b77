"""`CommandParser`, the argparse parser of `osmosis-tui` and of each subcommand: a mistake on
the command line gets a short usage line, the error with the flag or command probably meant,
and where the help is (exit 2), not the usage of every flag; `--help` shows the defaults."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher
from typing import Any, NoReturn

from tui.commands import exit_codes

#: How alike a typo and a name must be to suggest the name (difflib's ratio, dashes left out:
#: every flag starts with them, so they would make every pair look alike).
SIMILAR = 0.6
MAX_SUGGESTIONS = 3


class HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """`--help` with each flag's default value, when it has one worth showing: not None (its
    help then says in words what happens without the flag), not a switch that is off, not an
    empty list."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default = action.default
        if default is None or default is False or (isinstance(default, list) and not default):
            return action.help
        return super()._get_help_string(action)


class CommandParser(argparse.ArgumentParser):
    """An `ArgumentParser` for people: short about mistakes, and helpful with typos.
    Subparsers are made of the same class (argparse makes them of their parent's), so every
    subcommand answers alike."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpWithDefaults)
        super().__init__(*args, **kwargs)
        #: The parsers of the subcommands, by name (none for a subcommand's own parser).
        self.commands: dict[str, CommandParser] = {}

    def error(self, message: str) -> NoReturn:
        self.exit(
            exit_codes.BAD_INPUT,
            f"{self.format_usage()}{self.prog}: error: {message}\ntry '{self.prog} --help'\n",
        )

    def reject_unknown(self, words: Sequence[str]) -> NoReturn:
        """End on `words`, what parsing left over (`parse_known_args`): the first of them,
        and for a flag the flags of this parser it is closest to."""
        word = words[0]
        if not word.startswith("-") or word == "-":
            self.error(f"unexpected argument {word!r}")
        flag = word.split("=", 1)[0]
        flags = (action.option_strings for action in self._actions if action.option_strings)
        self.error(f"unknown flag {flag}{_did_you_mean(flag, flags)}")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's check of a choice (a command, `eval --on-interrupt`), answering with the
        # choice probably meant.
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(choice) for choice in choices]
        suggestion = _did_you_mean(str(value), ([name] for name in names))
        raise argparse.ArgumentError(
            action, f"invalid choice {value!r} (choose from {', '.join(names)}){suggestion}"
        )


def _did_you_mean(word: str, names: Iterable[Sequence[str]]) -> str:
    """The ending "; did you mean X?" naming the names closest to `word`; "" when none is
    close. `names` are groups of aliases (a flag's option strings): one suggestion per group,
    its closest alias."""
    typed = word.lstrip("-")
    scored: list[tuple[float, str]] = []
    for aliases in names:
        score, name = max(
            (SequenceMatcher(None, typed, alias.lstrip("-")).ratio(), alias) for alias in aliases
        )
        if score >= SIMILAR:
            scored.append((score, name))
    scored.sort(key=lambda pair: -pair[0])  # stable: equally close ones in declared order
    best = [name for _score, name in scored[:MAX_SUGGESTIONS]]
    if not best:
        return ""
    listed = best[0] if len(best) == 1 else f"{', '.join(best[:-1])} or {best[-1]}"
    return f"; did you mean {listed}?"
