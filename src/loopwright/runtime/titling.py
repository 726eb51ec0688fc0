"""Model-written session titles: `[titles]` in loopwright.toml names a model, and each new
session's title is what that model makes of its first message and first reply.

    [titles]
    model = "openai:gpt-4o-mini"      # a model spec as agents take it (unset: no model titles)
    prompt = "..."                    # optional: what the model is asked (`DEFAULT_PROMPT`)

In Python the same is one value, `Titles`: `create_app(project, titles=Titles("openai:..."))`
(a `ServerSettings` field, read from `[titles]` by `ServerSettings.from_project`), or, for a
runtime of your own, `Runtime(agents, log, observers=Titler(titles, log).observers())`.

A `Titler` is an observer of a runtime's runs (`loop.observers`): when a top-level session's
first reply is applied — in a run that began with no reply in its history, so the session's
first run — it asks the title model, in a task of its own, for a title of the run's first user
message and that reply. The run never waits for it nor sees it fail: a failure (the model's, or
the store's) is logged as a WARNING and the session keeps its first message as its title. The
title (one line, `titles.clip`ped to `TITLE_CHARS`) is stored once on the session's row
(`store.titles`); `settled` awaits the titles being written, `close` cancels them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import events as ev
from ..loop.observers import ObservedRun, ObservedSession, Observer
from ..messages import UserMessage
from ..models import Model, ModelFailure, ModelRequest
from ..models.registry import get_model
from ..store.log import SessionKey, Store
from ..store.titles import save_title
from ..telemetry import observers as default_observers
from .journal import LogJournal
from .titles import clip

logger = logging.getLogger("loopwright.runtime.titling")

DEFAULT_PROMPT = (
    "You name conversations. Given the first message of a conversation and the first reply, "
    "answer with a title of at most six words that says what it is about: the title alone, "
    "on one line, without quotes or a full stop."
)
REPLY_CHARS = 2000
"""Characters of the message and of the reply the title model is sent (at most)."""


@dataclass(frozen=True, slots=True)
class Titles:
    """The `[titles]` setting: the model that writes new sessions' titles and what it is asked."""

    model: str | Model
    """A model spec as agents take it (`"provider:model"`), or a `Model`."""
    prompt: str = DEFAULT_PROMPT
    """The system prompt of the title request."""

    @classmethod
    def from_project(cls, settings: Mapping[str, Any]) -> Titles | None:
        """`[titles]` of loopwright.toml (checked by `project.config`); None without a model."""
        table = settings.get("titles") or {}
        model = table.get("model") or ""
        return cls(model, table.get("prompt") or DEFAULT_PROMPT) if model else None


class TitleFailed(Exception):
    """The title model gave no title (its failure, or an empty answer)."""


class Titler:
    """Writes the titles of `titles` for the sessions of a runtime over `log` (the module)."""

    def __init__(self, titles: Titles, log: Store) -> None:
        self.titles = titles
        self.log = log
        self._tasks: set[asyncio.Task[None]] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop its titles are written on (the runtime's: set by the first one)."""

    def observers(self) -> tuple[Observer, ...]:
        """A runtime's observers with this one: the process's default ones, then this."""
        return (*default_observers(), self)

    def __call__(
        self, run: ObservedRun, session: ObservedSession | None
    ) -> Callable[[ev.Event | None], object]:
        journal = getattr(session, "journal", None)
        if session is None or session.state.replies or not isinstance(journal, LogJournal):
            return _ignored  # (a session that had a reply already, or not one of a log)
        if journal.parent is not None:
            return _ignored  # a subagent's session: listed through its parent's
        key, first = journal.key, list[str]()

        def observe(event: ev.Event | None) -> None:
            if isinstance(event, ev.InputReceived) and not first:
                first.append(event.message.content)
            elif isinstance(event, ev.MessageCompleted) and len(first) == 1:
                first.append(event.message.text)
                self._start(key, first[0], first[1])

        return observe

    def _start(self, key: SessionKey, message: str, reply: str) -> None:
        self.loop = asyncio.get_running_loop()
        task = self.loop.create_task(self._write(key, message, reply))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, key: SessionKey, message: str, reply: str) -> None:
        try:
            title = await self.ask(message, reply)
            await save_title(self.log, key, title)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning(
                "session %s of agent %s: no title from %s (%s); its first message titles it",
                key.id,
                key.agent,
                _named(self.titles.model),
                exc,
            )

    async def ask(self, message: str, reply: str) -> str:
        """The title the model gives `message` and `reply` (one line, clipped); `TitleFailed`."""
        said = f"Message:\n{message[:REPLY_CHARS]}\n\nReply:\n{reply[:REPLY_CHARS]}"
        request = ModelRequest(
            system=self.titles.prompt, messages=[UserMessage(content=said)], purpose="title"
        )
        answer = ""
        async for item in get_model(self.titles.model).stream(request):
            if isinstance(item, ModelFailure):
                raise TitleFailed(item.error)
            if isinstance(item, ev.MessageCompleted):
                answer = item.message.text
        title = clip(answer.strip().strip("\"'“”"))
        if not title:
            raise TitleFailed("an empty title")
        return title

    async def settled(self) -> None:
        """Return once every title asked for so far is written (or has failed)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """Cancel the titles still being written (their sessions keep their first message)."""
        for task in list(self._tasks):
            task.cancel()
        await self.settled()


def _ignored(event: ev.Event | None) -> None:
    return None


def _named(model: str | Model) -> str:
    return model if isinstance(model, str) else model.name
