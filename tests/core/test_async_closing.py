"""`AsyncClosing`: `async with` gives the resource back as it is and closes it on the way out."""

from __future__ import annotations

import pytest

from core.async_closing import AsyncClosing


class Resource(AsyncClosing):
    def __init__(self) -> None:
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_async_with_gives_it_back_and_closes_it_once() -> None:
    resource = Resource()
    async with resource as entered:
        assert entered is resource
        assert resource.closed == 0
    assert resource.closed == 1


async def test_an_error_in_the_block_closes_it_and_goes_on() -> None:
    resource = Resource()
    with pytest.raises(RuntimeError, match="in the block"):
        async with resource:
            raise RuntimeError("in the block")
    assert resource.closed == 1


def test_a_resource_without_aclose_cannot_be_made() -> None:
    class Unclosable(AsyncClosing):
        pass

    with pytest.raises(TypeError, match="aclose"):
        Unclosable()  # type: ignore[abstract]
