"""Live previews: while a rollout runs, `<root>/<rollout_id>/preview.json` shows its latest steps
(PROTOCOL.md §8.2).

On when the preview root (`_OSMOSIS_ROLLOUT_PREVIEW_ROOT` at server start, or the server's
`preview_root=`) is an absolute path with no symlink in it, for rollout ids a file name can
hold. Each rollout's publisher asks the rollout's registered `SampleSource` for a preview every
3 s and on each status change, and replaces the file (a temporary file, then `os.replace`, so a
reader never sees half of one) whenever its content changed. It stops after writing the
terminal status. Best effort: a failing source or a full disk only means no preview.

Besides the rollout's own key, the values of the variables `SECRET_NAMES_ENV` names (at server
start: the eval's `[secrets]`, which the rollout may well say in its conversation) are masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.types import (
    MAX_PREVIEW_BYTES,
    MAX_PREVIEW_STEPS,
    PREVIEW_FILE,
    PREVIEW_ID,
    PREVIEW_ROOT_ENV,
    SECRET_NAMES_ENV,
    RolloutStatus,
)
from server_stub.atomic_file import replace_file
from server_stub.log_safety import server_logger
from server_stub.preview_document import encode, preview_document
from server_stub.workflow import RolloutContext

logger = server_logger(__name__)

PREVIEW_INTERVAL_SEC = 3.0
SOURCE_TIMEOUT_SEC = 1.0
# At shutdown every rollout is terminal, so a publisher has one write left at most.
CLOSE_WAIT_SEC = 2.0


def _linked(path: Path) -> bool:
    """Whether `path` or any folder above it is a symlink (which could redirect the writes)."""
    return any(part.is_symlink() for part in (path, *path.parents))


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the variables `SECRET_NAMES_ENV` names in `environ` (those it holds)."""
    names = environ.get(SECRET_NAMES_ENV, "").split(",")
    return tuple(environ[name] for name in names if environ.get(name))


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step; refuses a destination reached through a symlink."""
    if _linked(path):
        raise OSError(f"refusing to write through a symlink: {path}")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    replace_file(path, data)


class PreviewFeed:
    """The server's previews: the root, and a publisher task per rollout.

    `root` None reads `_OSMOSIS_ROLLOUT_PREVIEW_ROOT` at start; an empty string keeps the feed
    off whatever the environment says.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._configured = root
        self._root: Path | None = None
        self._secrets: tuple[str, ...] = ()
        self._warned = False
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        configured = self._configured
        if configured is None:
            configured = os.environ.get(PREVIEW_ROOT_ENV, "")
        text = os.fspath(configured)
        if not text:
            return
        root = Path(text)
        if not root.is_absolute():
            logger.warning("live previews are off: the preview root is not an absolute path")
            return
        self._root = root
        self._secrets = secret_values(os.environ)

    def publisher(self, rollout_id: str, context: RolloutContext) -> PreviewPublisher | None:
        """A publisher for this rollout, or None when it gets no previews."""
        root = self._root
        if root is None or not PREVIEW_ID.fullmatch(rollout_id):
            return None
        # Checked per rollout: a symlink may appear in the path while the server runs.
        if _linked(root):
            if not self._warned:
                self._warned = True
                logger.warning("live previews are off: the preview root's path has a symlink")
            return None
        return PreviewPublisher(
            root / rollout_id / PREVIEW_FILE, context, self._secrets, self._tasks
        )

    async def close(self) -> None:
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=CLOSE_WAIT_SEC)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


class PreviewPublisher:
    """Keeps one rollout's preview.json current; told each status by the server's registry."""

    def __init__(
        self,
        path: Path,
        context: RolloutContext,
        secrets: tuple[str, ...],
        tasks: set[asyncio.Task[None]],
    ) -> None:
        self.path = path
        self.context = context
        self.secrets = secrets
        self.status = RolloutStatus.QUEUED
        self.version = 0
        self._tasks = tasks
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._latest: dict[str, Any] | None = None
        self._written: bytes | None = None  # what was last written, without version and time

    def observe(self, status: RolloutStatus) -> None:
        """A status the server gave the rollout; the first (`queued`) starts the publisher."""
        self.status = status
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._tasks.add(self._task)
            self._task.add_done_callback(self._tasks.discard)

    async def _run(self) -> None:
        while True:
            self._changed.clear()
            status = self.status
            await self._capture()
            await self._publish(status)
            if status.is_terminal:
                return
            # asyncio.TimeoutError: not yet the builtin TimeoutError on Python 3.10.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), PREVIEW_INTERVAL_SEC)

    async def _capture(self) -> None:
        """Ask the sample source for its newest messages and convert them (off the loop)."""
        context = self.context
        source = context.sample_source
        if source is None or not context.preview_enabled:
            return
        try:
            sample = await asyncio.wait_for(
                source.get_preview(MAX_PREVIEW_STEPS), SOURCE_TIMEOUT_SEC
            )
            if sample is None:
                return
            document = await asyncio.to_thread(
                preview_document, sample, context.rollout_id, context.api_key, self.secrets
            )
        except Exception:
            logger.debug("no preview from the sample source of %s", context.rollout_id)
            return
        if document is not None:
            self._latest = document

    async def _publish(self, status: RolloutStatus) -> None:
        """Write the latest preview with `status`, unless the file already says exactly that."""
        document = self._latest
        if document is None:
            return
        metadata = document["extra"]["osmosis"]
        metadata.pop("preview_version", None)
        metadata.pop("updated_at", None)
        metadata["status"] = status.value
        unversioned = encode(document)
        if unversioned == self._written:
            return
        metadata["preview_version"] = self.version + 1
        metadata["updated_at"] = datetime.now(timezone.utc).isoformat()
        data = encode(document)
        if len(data) > MAX_PREVIEW_BYTES:
            return
        try:
            await asyncio.to_thread(write_atomically, self.path, data)
        except Exception:
            logger.debug("could not write the preview of %s", self.context.rollout_id)
            return
        self._written = unversioned
        self.version += 1
