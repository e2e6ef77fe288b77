"""What makes a text a usable base URL of a server: the one check behind `--server`,
`--advertise-url` and every line of a `--servers-file`."""

from __future__ import annotations

from urllib.parse import urlsplit


def base_url_problem(text: str) -> str | None:
    """Why `text` is no base URL to reach a server at, or None when it is one: http or https,
    a host, a port of 1-65535 if any, a path if need be, and nothing the client would append a
    path to wrongly (a query, a fragment)."""
    if "://" not in text:
        return f"{text!r} has no scheme: write http://{text}"
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # an unclosed IPv6 bracket
        return f"{text!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{text!r}: the scheme must be http or https, not {parts.scheme!r}"
    if not parts.hostname:
        return f"{text!r} has no host"
    try:
        port_number = parts.port  # None without one; ValueError when not a number up to 65535
    except ValueError:
        port_number = 0
    if port_number == 0:
        given = parts.netloc.rpartition(":")[2]
        return f"{text!r} has a bad port {given!r} (1-65535)"
    if parts.query or parts.fragment:
        return f"{text!r}: a base URL takes no query or fragment"
    return None


def base_url(text: str) -> str:
    """A checked base URL as the run keeps it: without the trailing slashes, which the client
    adds its paths after."""
    return text.rstrip("/")
