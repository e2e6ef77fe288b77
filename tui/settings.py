"""What the dashboard remembers between runs: the theme and the table's sort, in a small JSON
file in the user's config folder (`$XDG_CONFIG_HOME/osmosis-tui/settings.json`, else
`~/.config/osmosis-tui/settings.json`).

A convenience, never a reason to fail: a file that is missing, unreadable, not JSON or of
another shape is ignored with a log line (the run's log, when there is one), and so is a
setting that makes no sense any more (a theme or a column that is gone); a file that cannot be
written is logged too. Only a regular file of at most `MAX_SETTINGS_BYTES` is read, opened
without blocking (a FIFO in its place never held the dashboard's start), parsed by the bounded
JSON reader, and each value checked for its type before it is used. It is written whole to a
temporary file beside it, then renamed over it, so that a crash or a second dashboard never
leaves half a file. No Textual here.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.results.durable import write_bytes_atomic
from core.eval.safe_text import shown_value
from core.eval.untrusted_json import load_json
from tui.widgets.table.sorting import SORT_COLUMNS, Sort

logger = logging.getLogger(__name__)

APP_FOLDER = "osmosis-tui"
SETTINGS_FILE = "settings.json"
#: The file is a few dozen bytes; one past this is no settings file, and is not read.
MAX_SETTINGS_BYTES = 64 * 1024


def settings_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the settings live. A relative `XDG_CONFIG_HOME` is ignored, as the XDG base
    directory spec says."""
    config_home = environ.get("XDG_CONFIG_HOME", "")
    root = Path(config_home) if os.path.isabs(config_home) else Path.home() / ".config"
    return root / APP_FOLDER / SETTINGS_FILE


@dataclass(frozen=True)
class Settings:
    #: The Textual theme's name; None: Textual's default (or `TEXTUAL_THEME`).
    theme: str | None = None
    #: The table's sort; None: the order submitted.
    sort: Sort | None = None


class _Ignored(Exception):
    """Why the file is not read (the log line says it)."""


def _sort_from(value: Any, path: Path) -> Sort | None:
    if value is None:
        return None
    if isinstance(value, dict):
        column, descending = value.get("column"), value.get("descending", False)
        known = column is None or (isinstance(column, str) and column in SORT_COLUMNS)
        if known and isinstance(descending, bool):
            return Sort(column, descending and column is not None)
    logger.warning("settings %s: ignoring the sort %s (no such column)", path, shown_value(value))
    return None


def load_settings(path: Path) -> Settings:
    """The settings in `path`; the defaults when there are none that can be read."""
    try:
        data = _read_bytes(path)
        if data is None:
            return Settings()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, _Ignored) as exc:
        logger.warning("settings %s: ignored, it cannot be read (%s)", path, exc)
        return Settings()
    try:
        document = load_json(text)
    except ValueError as exc:
        logger.warning("settings %s: ignored, it is not JSON (%s)", path, exc)
        return Settings()
    if not isinstance(document, dict):
        logger.warning("settings %s: ignored, it is not a JSON object", path)
        return Settings()
    theme = document.get("theme")
    if theme is not None and not isinstance(theme, str):
        logger.warning("settings %s: ignoring the theme %s (not a name)", path, shown_value(theme))
        theme = None
    return Settings(theme=theme, sort=_sort_from(document.get("sort"), path))


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when there is no file."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise _Ignored("not a regular file")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            data = file.read(MAX_SETTINGS_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_SETTINGS_BYTES:
        raise _Ignored(f"larger than {MAX_SETTINGS_BYTES:,} bytes")
    return data


def save_settings(path: Path, settings: Settings) -> None:
    """Write `settings` to `path` atomically; a failure is logged, not raised."""
    sort = settings.sort
    document = {
        "theme": settings.theme,
        "sort": None if sort is None else {"column": sort.column, "descending": sort.descending},
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, (json.dumps(document, indent=2) + "\n").encode())
    except OSError as exc:
        logger.warning("settings %s: not saved (%s)", path, exc)
