"""The sandbox's network policy: `none`, `all`, or an allow-list of hosts (docs/sandbox.md).

An entry is `host`, `host:port`, `*.example.com` (any subdomain of example.com, not itself) or
`*.example.com:443`; a host is a name, an IPv4 address or a bracketed IPv6 one (`[::1]:8080`).
Names are compared without case and without a trailing dot.
"""

from __future__ import annotations

import ipaddress
import re

from ..errors import ConfigError

__all__ = ["allows", "hosts", "is_literal", "split"]

_NAME = re.compile(r"(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
_ENTRY = re.compile(r"(?P<host>\[[0-9a-f:.]+\]|[^:\[\]]+)(:(?P<port>[0-9]{1,5}))?")


def hosts(entries: object) -> tuple[str, ...]:
    """The allow-list `entries`, checked and normalised (lower case, no trailing dot), or a
    `ConfigError` naming the first bad entry."""
    if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
        raise ConfigError(
            f"sandbox network: expected 'none', 'all' or a list of hosts, got {entries!r}"
        )
    if not entries:
        raise ConfigError("sandbox network: the list of hosts is empty (use 'none')")
    return tuple(_entry(entry) for entry in entries)


def _entry(entry: object) -> str:
    text = entry.strip().lower() if isinstance(entry, str) else ""
    match = _ENTRY.fullmatch(text)
    host = (match["host"] or "").rstrip(".") if match else ""
    port = match["port"] if match else None
    if not host or (port is not None and not 0 < int(port) < 65536):
        raise ConfigError(f"sandbox network: {entry!r} is not host, host:port or *.domain[:port]")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ConfigError(f"sandbox network: {entry!r} is not an IPv6 address") from None
    elif not _NAME.fullmatch(host):
        raise ConfigError(f"sandbox network: {entry!r} is not host, host:port or *.domain[:port]")
    return host if port is None else f"{host}:{int(port)}"


def split(entry: str) -> tuple[str, int | None]:
    """The host (IPv6 in brackets) and the port (None: any) of a checked entry."""
    host, colon, port = entry.rpartition(":")
    if colon and not port.endswith("]"):
        return host, int(port)
    return entry, None


def allows(entries: tuple[str, ...], host: str, port: int) -> str | None:
    """The entry of `entries` that lets `host:port` through (host as the client named it:
    a name, an IPv4 address or a bare IPv6 one), or None."""
    host = host.lower().rstrip(".")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    for entry in entries:
        pattern, wanted = split(entry)
        if wanted is not None and wanted != port:
            continue
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
                return entry
        elif host == pattern:
            return entry
    return None


def is_literal(entry: str) -> bool:
    """Whether the entry names an address (or `localhost`) rather than a name DNS answers for."""
    host = split(entry)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
