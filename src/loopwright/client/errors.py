"""The client's errors: one per kind of answer a server refuses with, each carrying the
server's own message (its `{"error": ...}`) and the HTTP status."""

from __future__ import annotations


class ClientError(Exception):
    """The server refused the request: `status` is the HTTP status, `message` its words."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class BadRequest(ClientError):
    """400 (or 422): the request was not one the server takes (a bad field, an invalid edit)."""


class AccessDenied(ClientError):
    """401 or 403: no token, a wrong one, or a host or origin the server refuses."""


class NotFound(ClientError):
    """404: no such agent, session or pending item (or one already decided)."""


class Conflict(ClientError):
    """409: the session is busy, or paused on items that need a decision first."""


class RateLimited(ClientError):
    """429: the tenant's runs or streams are at their limit."""


class ServerError(ClientError):
    """5xx: the run failed, or the server did."""


class StreamDropped(Exception):
    """A stream's connection dropped and could not be resumed (`reconnects` attempts in a row
    failed, or it dropped before the session was known)."""


_BY_STATUS: dict[int, type[ClientError]] = {
    400: BadRequest,
    401: AccessDenied,
    403: AccessDenied,
    404: NotFound,
    409: Conflict,
    422: BadRequest,
    429: RateLimited,
}


def error_for(status: int, message: str) -> ClientError:
    """The typed error of a refused answer."""
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ClientError)
    return kind(status, message)
