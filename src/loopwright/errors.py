"""The exceptions loopwright raises: only for programmer and configuration errors.

    LoopwrightError
     ├── ConfigError      bad agent, tool, rules or model configuration (names file and line)
     ├── ToolError        raise inside a tool to hand the model a clean error message
     ├── SessionBusy      a second run was started on a session that is running (or paused)
     ├── UnknownPending   no pending item has this id (for this tenant)
     ├── UnknownSession   no session has this id (for this tenant)
     ├── UnknownModel     a `provider:model` string names no registered provider
     └── CommitFailed     a journal could not log a run's events (the run ends with
                          `loop:error` when it can still be logged; never raised by a run)

Everything a model can act on (unknown tools, bad arguments, failing tools, denials) is data:
a tool result with `is_error` set, never an exception.
"""

from __future__ import annotations


class LoopwrightError(Exception):
    """Base of every loopwright exception."""


class ConfigError(LoopwrightError):
    """Invalid configuration; `source` names the file (and line) when there is one."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source


class ToolError(LoopwrightError):
    """Raised by a tool: the message becomes an error result the model reads, without a
    traceback or the exception's class name."""


class SessionBusy(LoopwrightError):
    """The session already has a run in progress (one run at a time per session)."""


class UnknownPending(LoopwrightError):
    """No open or resolved pending item has this id."""


class UnknownSession(LoopwrightError):
    """No session has this id for this tenant (a foreign id is unknown too)."""


class UnknownModel(ConfigError):
    """No provider is registered for the model string."""


class CommitFailed(LoopwrightError):
    """A journal's commit failed (other than a takeover): the driver hands it to the loop,
    which ends the run with `loop:error`; if that cannot be logged either, the run raises the
    commit's own error (its `__cause__`)."""


def describe(exc: BaseException) -> str:
    """`Type: message` for an exception (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if type(exc).__name__ == "ModelFailed":
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
