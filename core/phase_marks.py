"""`PhaseMarks`: a rollout's `PhaseMark`s by status, packed once the rollout is over.

While a rollout runs its marks are a dict the board writes to. A long run keeps the marks of
every finished rollout, about 170 bytes a mark as objects (the mark, its floats, the dict's
share); `pack` keeps them as 35 bytes each, read back as equal `PhaseMark`s. A mark written to
a packed set (a server's report arriving after the poll that ended the rollout) is packed with
the rest. `at` and `times` read the times alone, for the readers that visit every row.
"""

from __future__ import annotations

import struct
from collections.abc import ItemsView, Iterator, KeysView, Mapping, MutableMapping, ValuesView
from typing import get_args

from core.phases import PhaseMark, PhaseSource
from core.types import RolloutStatus

_STATUSES = tuple(RolloutStatus)
_STATUS_INDEX = {status: index for index, status in enumerate(_STATUSES)}
_SOURCES: tuple[PhaseSource, ...] = get_args(PhaseSource)
_SOURCE_INDEX = {source: index for index, source in enumerate(_SOURCES)}
# Packed, the marks are their statuses (a byte each, so that one is found at C speed), then an
# entry each: source, which optional fields are there, at, server_time, polled_at,
# event_sequence.
_ENTRY = struct.Struct("<BBdddq")
_MARK_BYTES = 1 + _ENTRY.size
_SERVER_TIME, _POLLED_AT, _SEQUENCE = 1, 2, 4
_ENTRY_BYTES = _ENTRY.size
# An entry's `at`, after its two one-byte fields.
_unpack_at, _AT_OFFSET = struct.Struct("<d").unpack_from, 2
_INT64 = range(-(2**63), 2**63)
_Entry = tuple[int, int, float, float, float, int]


class PhaseMarks(MutableMapping[RolloutStatus, PhaseMark]):
    """The marks by status: a dict until `pack`, then bytes (and the server ids, if any)."""

    __slots__ = ("_ids", "_marks", "_packed")

    def __init__(self, marks: Mapping[RolloutStatus, PhaseMark] | None = None) -> None:
        self._marks: dict[RolloutStatus, PhaseMark] | None = dict(marks or ())
        self._packed = b""
        self._ids: tuple[str | None, ...] | None = None

    def pack(self) -> None:
        """Keep them packed from now on (a mark that does not fit the packing, a sequence
        number beyond 64 bits, leaves them as they are)."""
        marks = self._marks
        if marks is None:
            return
        sequences = (mark.event_sequence for mark in marks.values())
        if any(sequence is not None and sequence not in _INT64 for sequence in sequences):
            return
        statuses = bytes(_STATUS_INDEX[status] for status in marks)
        self._packed = statuses + b"".join(map(_packed, marks.values()))
        ids = tuple(mark.server_id for mark in marks.values())
        self._ids = ids if any(server_id is not None for server_id in ids) else None
        self._marks = None

    @property
    def packed(self) -> bool:
        return self._marks is None

    def at(self, status: RolloutStatus) -> float | None:
        """When `status`'s mark says it began (None: no mark), without making the mark."""
        marks = self._marks
        if marks is not None:
            mark = marks.get(status)
            return None if mark is None else mark.at
        # Found among the status bytes alone: a sort reads this for every finished row.
        packed = self._packed
        count = len(packed) // _MARK_BYTES
        position = packed.find(_STATUS_INDEX[status], 0, count)
        if position < 0:
            return None
        at: float = _unpack_at(packed, count + position * _ENTRY_BYTES + _AT_OFFSET)[0]
        return at

    def times(self) -> list[tuple[RolloutStatus, float]]:
        """Each mark's status and time, in the order they were set."""
        marks = self._marks
        if marks is not None:
            return [(status, mark.at) for status, mark in marks.items()]
        return [(_STATUSES[status], entry[2]) for status, entry in self._entries()]

    def _entries(self) -> Iterator[tuple[int, _Entry]]:
        """Each packed mark's status index and entry, in order."""
        packed = self._packed
        count = len(packed) // _MARK_BYTES
        return zip(packed[:count], _ENTRY.iter_unpack(memoryview(packed)[count:]), strict=True)

    def _dict(self) -> dict[RolloutStatus, PhaseMark]:
        marks = self._marks
        if marks is not None:
            return marks
        ids = self._ids
        return {
            _STATUSES[status]: _unpacked(status, entry, None if ids is None else ids[position])
            for position, (status, entry) in enumerate(self._entries())
        }

    def __getitem__(self, status: RolloutStatus) -> PhaseMark:
        marks = self._marks
        return marks[status] if marks is not None else self._dict()[status]

    def __setitem__(self, status: RolloutStatus, mark: PhaseMark) -> None:
        marks = self._marks
        if marks is not None:
            marks[status] = mark
            return
        self._marks = {**self._dict(), status: mark}
        self.pack()

    def __delitem__(self, status: RolloutStatus) -> None:
        marks = self._marks
        if marks is not None:
            del marks[status]
            return
        self._marks = self._dict()
        del self._marks[status]
        self.pack()

    def __iter__(self) -> Iterator[RolloutStatus]:
        marks = self._marks
        if marks is not None:
            return iter(marks)
        return (_STATUSES[status] for status in self._packed[: len(self)])

    def __len__(self) -> int:
        marks = self._marks
        return len(marks) if marks is not None else len(self._packed) // _MARK_BYTES

    def __contains__(self, status: object) -> bool:
        marks = self._marks
        if marks is not None:
            return status in marks
        return any(known == status for known in self)

    def keys(self) -> KeysView[RolloutStatus]:
        return self._dict().keys()

    def values(self) -> ValuesView[PhaseMark]:
        return self._dict().values()

    def items(self) -> ItemsView[RolloutStatus, PhaseMark]:
        return self._dict().items()

    def __repr__(self) -> str:
        return f"PhaseMarks({self._dict()!r})"


def _packed(mark: PhaseMark) -> bytes:
    present = (
        (_SERVER_TIME if mark.server_time is not None else 0)
        | (_POLLED_AT if mark.polled_at is not None else 0)
        | (_SEQUENCE if mark.event_sequence is not None else 0)
    )
    return _ENTRY.pack(
        _SOURCE_INDEX[mark.source],
        present,
        mark.at,
        mark.server_time or 0.0,
        mark.polled_at or 0.0,
        mark.event_sequence or 0,
    )


def _unpacked(status: int, entry: _Entry, server_id: str | None) -> PhaseMark:
    source, present, at, server_time, polled_at, sequence = entry
    return PhaseMark(
        _STATUSES[status],
        at,
        _SOURCES[source],
        server_time=server_time if present & _SERVER_TIME else None,
        event_sequence=sequence if present & _SEQUENCE else None,
        server_id=server_id,
        polled_at=polled_at if present & _POLLED_AT else None,
    )


__all__ = ["PhaseMarks"]
