"""The one rule for finding known secrets in text, shared by every writer that masks them: the
eval's `logs.txt` and output (`core.eval.redact`), and the rollout server's live previews and
log (`server_stub`), which import nothing of the eval.

A secret may reach text as it is, or escaped on its way: JSON-escaped (also twice, for JSON
inside a JSON string, and without `ensure_ascii`), `repr()`-escaped, URL-encoded (`quote`,
`quote_plus`); each form of the secret and of its stripped value is searched for. Secrets
shorter than `MIN_SECRET_LENGTH` characters are not: replacing every "abc" of a text would
garble it without protecting anything worth the name. Each writer puts its own mark in place
of a match (`***` in logs, `[REDACTED]` in a preview, as official previews write).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

MIN_SECRET_LENGTH = 4


def spellings(secret: str) -> set[str]:
    """The spellings under which `secret` may appear in text, each `MIN_SECRET_LENGTH` long or
    longer (none for a shorter secret)."""
    forms: set[str] = set()
    for base in {secret, secret.strip()}:
        json_ascii = json.dumps(base)[1:-1]
        forms.update(
            {
                base,
                json_ascii,
                json.dumps(base, ensure_ascii=False)[1:-1],
                json.dumps(json_ascii)[1:-1],
                repr(base)[1:-1],
                quote(base, safe=""),
                quote_plus(base, safe=""),
            }
        )
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def kept_secrets(secrets: Iterable[str | None]) -> tuple[str, ...]:
    """The secrets worth searching for (`MIN_SECRET_LENGTH` or longer, once stripped), once
    each, in their order."""
    return tuple(dict.fromkeys(s for s in secrets if s and len(s.strip()) >= MIN_SECRET_LENGTH))


def known_secrets_pattern(secrets: Iterable[str | None]) -> re.Pattern[str] | None:
    """A pattern matching every spelling of every secret worth searching for, longest first
    (a secret that contains another is masked whole); None when there is none."""
    forms = set().union(*(spellings(s) for s in kept_secrets(secrets)))
    ordered = sorted(forms, key=lambda form: (-len(form), form))
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


__all__ = ["MIN_SECRET_LENGTH", "kept_secrets", "known_secrets_pattern", "spellings"]
