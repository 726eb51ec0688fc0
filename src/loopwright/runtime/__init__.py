"""The runtime: one service between the core and every interface, over an event log.

`Runtime` sends, resolves (and resumes), cancels, steers, compacts and follows sessions named by
(tenant, agent, id); `LogJournal` is the core's `Journal` over a `Store`; `LiveRun` is a run
in progress in this process; `open_session` is one session kept in a log, for a script.
"""

from .journal import LogJournal, Settings
from .live import LiveRun
from .service import Resolved, Runtime
from .sessions import open_session

__all__ = ["LiveRun", "LogJournal", "Resolved", "Runtime", "Settings", "open_session"]
