"""`AsyncClosing`: a resource that `async with` closes with its own `aclose()`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import TypeVar

_Closing = TypeVar("_Closing", bound="AsyncClosing")


class AsyncClosing(ABC):
    """`async with` for a resource that is ready once made (nothing to start): entering gives
    it back as it is, leaving awaits its `aclose()`, an error in the block or not."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release what the resource holds."""

    async def __aenter__(self: _Closing) -> _Closing:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
