"""Message content nested far deeper than any conversation (issue 30): OpenAI Agents SDK output
items, each holding the next as its content, as objects or JSON-encoded into one string."""

from __future__ import annotations

from typing import Any

INNERMOST = "the innermost text"
_ITEM_OPEN = '[{"type":"message","content":'
_ITEM_CLOSE = "}]"


def nested_items(levels: int) -> dict[str, Any]:
    """`levels` output items, each the content of the one around it (built without recursion)."""
    content: Any = INNERMOST
    for _ in range(levels):
        content = {"type": "message", "content": content}
    return dict(content)


def nested_items_text(levels: int) -> str:
    """`levels` output items, each in a list that is the content of the one around it,
    JSON-encoded: ~31 characters a level (350 levels: 11 kB, within a preview's text bound, and
    700 levels of arrays and objects, which Python's JSON parser still reads)."""
    return _ITEM_OPEN * levels + f'"{INNERMOST}"' + _ITEM_CLOSE * levels
