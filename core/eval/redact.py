"""Masking secrets in anything an eval run logs or prints.

`Redactor(secrets)` replaces every known secret (the LLM key, the server bearer, ...) with
`***`, in each form it is likely to reach text in (`core.secret_forms`, the rule the rollout
server's previews share: as is, JSON-escaped, `repr()`-escaped, URL-encoded). It then masks
credentials it was not told about:

- the value of an `Authorization` header, in header (`Authorization: Bearer x`), JSON or
  Python-dict form, keeping the scheme word (`Bearer ***`);
- a `Bearer <token>` anywhere, for tokens of 8+ characters (shorter words are prose:
  "bearer token");
- `sk-...` style API keys (`sk-` followed by 8+ key characters);
- the value assigned to a name ending in `api_key`/`api-key`/`apikey`, `secret` or
  `password` (`ROLLOUT_LLM_API_KEY=...`, `"api_key": "..."`).

Secrets shorter than `core.secret_forms.MIN_SECRET_LENGTH` characters are not masked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.secret_forms import kept_secrets, known_secrets_pattern

MASK = "***"

# Characters that end a credential value in headers, JSON and Python reprs.
_VALUE = r"[^\s\"',;}\]\[)]+"

_AUTHORIZATION = re.compile(
    r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?\s*)((?:bearer|basic|token|apikey)\s+)?" + _VALUE
)
_BEARER = re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*")
_SK_KEY = re.compile(r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{8,}")
_NAMED_SECRET = re.compile(
    r"(?i)(\b[\w\-]*(?:api[_\-]?key|secret|password)[\"']?\s*[:=]\s*[\"']?)" + _VALUE
)


class Redactor:
    """Masks known secrets and generic credential patterns in text. Immutable."""

    __slots__ = ("_known", "_secrets")

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: tuple[str, ...] = kept_secrets(secrets)
        self._known: re.Pattern[str] | None = known_secrets_pattern(self._secrets)

    def with_secrets(self, secrets: Iterable[str | None]) -> Redactor:
        """A redactor that also masks `secrets` (e.g. a key that became known later)."""
        return Redactor([*self._secrets, *secrets])

    def redact(self, text: str) -> str:
        # Known secrets first: the generic patterns could otherwise cut one in two and
        # leave a recognisable tail.
        if self._known is not None:
            text = self._known.sub(MASK, text)
        text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{m.group(2) or ''}{MASK}", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", text)
        text = _SK_KEY.sub(MASK, text)
        return _NAMED_SECRET.sub(lambda m: f"{m.group(1)}{MASK}", text)

    __call__ = redact


__all__ = ["MASK", "Redactor"]
