"""A time as others write it: ISO-8601 text from a file or a server, read without trusting it.

One reading for every side: the dashboard's transcript (a preview's `updated_at`) and the eval's
readers of results files (`core.eval.untrusted_json`) alike.
"""

from __future__ import annotations

from datetime import datetime, timezone


def utc_moment(value: object) -> datetime | None:
    """An ISO-8601 time (`…Z` or with an offset; without one, UTC) as an aware datetime;
    None when it is none."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
