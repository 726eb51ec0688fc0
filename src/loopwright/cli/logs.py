"""Where the commands' logs go: to stderr, through `redact.LogFilter` (RELIABILITY P11). Without
a handler of its own, a library's records reach Python's last resort, which filters nothing."""

from __future__ import annotations

import logging
import sys

from ..redact import LogFilter

FORMAT = "loopwright: %(levelname)s %(name)s: %(message)s"


class Stderr(logging.Handler):
    """Writes each record to whatever `sys.stderr` is when it comes (as the last resort does),
    its secrets redacted."""

    def __init__(self, level: int = logging.WARNING, fmt: str = FORMAT) -> None:
        super().__init__(level)
        self.setFormatter(logging.Formatter(fmt))
        self.addFilter(LogFilter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def redact_logs() -> None:
    """loopwright's own records, WARNING and up, to stderr redacted (once per process)."""
    ours = logging.getLogger("loopwright")
    if not any(isinstance(h, Stderr) for h in ours.handlers):
        ours.addHandler(Stderr())


def redact_handlers(*names: str) -> None:
    """Redact what the handlers of these loggers write (uvicorn's, which uvicorn configures)."""
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, LogFilter) for f in handler.filters):
                handler.addFilter(LogFilter())


def everything_to_stderr(level: int, fmt: str) -> None:
    """Every logger's records at `level` and up (not only loopwright's) to stderr, redacted, in
    place of `redact_logs` (`loopwright acp`, whose stdout is the protocol's)."""
    ours = logging.getLogger("loopwright")
    for handler in [h for h in ours.handlers if isinstance(h, Stderr)]:
        ours.removeHandler(handler)
    logging.basicConfig(level=level, handlers=[Stderr(logging.NOTSET, fmt)])
