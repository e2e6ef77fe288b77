"""`PackedTransitions`: a finished rollout's observed statuses, nine bytes each.

A live handle keeps its transitions in a list of `Transition` tuples, which it appends to as it
polls. Once the rollout is done that list never changes again, yet a long run keeps one per
finished rollout: a list and a tuple per status, about 90 bytes a status. Packed, a status is
its index in `RolloutStatus` and its time, read back as the same `Transition`s.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from core.handle import Transition
from core.types import RolloutStatus

_STATUSES = tuple(RolloutStatus)
_INDEX = {status: index for index, status in enumerate(_STATUSES)}
_ENTRY = struct.Struct("<Bd")


class PackedTransitions(Sequence[Transition]):
    """The `Transition`s given, in order, read back as new tuples (equal to the given)."""

    __slots__ = ("_packed",)

    def __init__(self, transitions: Iterable[Transition]) -> None:
        self._packed = b"".join(_ENTRY.pack(_INDEX[status], at) for status, at in transitions)

    def __len__(self) -> int:
        return len(self._packed) // _ENTRY.size

    @overload
    def __getitem__(self, index: int) -> Transition: ...

    @overload
    def __getitem__(self, index: slice) -> list[Transition]: ...

    def __getitem__(self, index: int | slice) -> Transition | list[Transition]:
        if isinstance(index, slice):
            return list(self)[index]
        count = len(self)
        position = index + count if index < 0 else index
        if not 0 <= position < count:
            raise IndexError(index)
        status, at = _ENTRY.unpack_from(self._packed, position * _ENTRY.size)
        return Transition(_STATUSES[status], at)

    def __iter__(self) -> Iterator[Transition]:
        for status, at in _ENTRY.iter_unpack(self._packed):
            yield Transition(_STATUSES[status], at)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedTransitions):
            return self._packed == other._packed
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which have none

    def __repr__(self) -> str:
        return f"PackedTransitions({list(self)!r})"


__all__ = ["PackedTransitions"]
