"""Where the run's rollout servers are: the URLs given (`--server`, the lines of
`--servers-file`), each host name standing for every address it resolves to, looked up
again while the run lives.

A rollout must stay on the server that admitted it (its lease lives there), so a fleet of
servers behind one name (a Kubernetes headless Service, a DNS name with many A records) is
driven as that many servers, each by its address, never through a balancer. A name stands for
its IPv4 addresses (else its IPv6 ones): one address, or a name that does not resolve now,
leaves the URL as it was given (a server that is not up yet is the pool's to find down).
`https` URLs stay as given: TLS checks the server's certificate against the name, which an
address in its place would fail.

The servers file holds one URL a line; blank lines and lines starting with `#` are skipped.
It is read again when it changes (its size or modification time); a change that does not read
(a bad line, the file gone for a moment) keeps the servers read last, with a warning, so that
an editor's save or a half-written file never empties the pool. Bad lines at the start are
bad input (exit 2, naming the file and line).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from core.eval.errors import InputError, InputProblem
from core.eval.plan.server_url import base_url, base_url_problem

logger = logging.getLogger(__name__)

SERVERS_FILE_FLAG = "--servers-file"


def read_servers_file(path: Path) -> tuple[str, ...]:
    """The URLs `path` lists, in order, each once; `InputError` naming the file and line of
    every bad one (or the file, when it cannot be read or lists none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.single(
            str(path), f"cannot be read ({exc})", key=SERVERS_FILE_FLAG
        ) from None
    urls: dict[str, None] = {}
    problems: list[InputProblem] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        problem = base_url_problem(line)
        if problem is None:
            urls[base_url(line)] = None
        else:
            problems.append(InputProblem(str(path), number, None, problem))
    if problems:
        raise InputError(problems)
    if not urls:
        raise InputError.single(str(path), "lists no server URL", key=SERVERS_FILE_FLAG)
    return tuple(urls)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def with_host(url: str, address: str) -> str:
    """`url` with its host replaced by `address` (bracketed when IPv6), port and path kept."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def addresses_of(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (the system's resolver: hosts file, DNS), IPv4 ones
    if any, else IPv6, each once, in the resolver's order."""
    loop = asyncio.get_running_loop()
    found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    by_family: dict[int, dict[str, None]] = {}
    for family, _, _, _, sockaddr in found:
        by_family.setdefault(family, {})[str(sockaddr[0])] = None
    chosen = by_family.get(socket.AF_INET) or by_family.get(socket.AF_INET6) or {}
    return list(chosen)


@dataclass
class ServerDirectory:
    """The servers a run drives, as the URLs to reach each one by (see the module
    docstring); `endpoints()` looks again."""

    given: tuple[str, ...]
    """`--server` URLs, as given."""
    file: Path | None = None
    """`--servers-file`."""
    _listed: tuple[str, ...] = ()
    _stamp: tuple[int, int] | None = None
    _expanded: dict[str, list[str]] = field(default_factory=dict)

    def _read_file(self) -> tuple[str, ...]:
        """The file's URLs: read again only when it changed; what was read last when it does
        not read now (said once per change)."""
        assert self.file is not None
        try:
            info = os.stat(self.file)
        except OSError as exc:
            if self._stamp is not None:
                logger.warning(
                    "%s: %s; keeping its last %d servers", self.file, exc, len(self._listed)
                )
                self._stamp = None
            return self._listed
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp == self._stamp:
            return self._listed
        self._stamp = stamp
        try:
            self._listed = read_servers_file(self.file)
        except InputError as exc:
            logger.warning("%s; keeping its last %d servers", exc, len(self._listed))
        return self._listed

    def urls(self) -> tuple[str, ...]:
        """The URLs given and listed, each once, before names are resolved."""
        listed = self._read_file() if self.file is not None else ()
        return tuple(dict.fromkeys((*self.given, *listed)))

    async def endpoints(self) -> list[str]:
        """A URL per server: each URL given, or one per address of its host name."""
        found: dict[str, None] = {}
        for url in self.urls():
            for endpoint in await self._expand(url):
                found[endpoint] = None
        return list(found)

    async def _expand(self, url: str) -> list[str]:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme != "http" or _is_address(host):
            return [url]
        port = parts.port or 80
        try:
            addresses = await addresses_of(host, port)
        except (OSError, UnicodeError) as exc:
            # A name that does not resolve now: what it resolved to last (a DNS blip does not
            # drain a fleet), else the URL itself, for the pool to find down.
            before = self._expanded.get(url)
            if before is not None:
                logger.warning("%s: %s; keeping its last %d addresses", host, exc, len(before))
                return before
            return [url]
        expanded = [url] if len(addresses) <= 1 else [with_host(url, a) for a in addresses]
        self._expanded[url] = expanded
        return expanded
