"""A session's history: its conversation as the model sees it (the messages themselves are
`messages`; what else a session is — its open batch, carry-over, queue — is
`session_state.SessionState`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..messages import CustomMessage, Message, Usage, message_chars


@dataclass(slots=True)
class EncodedMessages:
    """The wire JSON of a history's first messages, kept with it so that a snapshot serialises
    and redacts each message once (`snapshots.to_snapshot`): `text` is the JSON objects of
    `messages` — these very objects, in order — joined by commas, redacted (P11)."""

    messages: list[Message]
    text: str


@dataclass(slots=True)
class History:
    """A session's conversation as the model sees it: its messages and their size.

    It changes as the session's events are applied to it (`replay`, live and when the log is
    read). `messages` only grows during a run (compaction replaces it atomically between steps).
    Sizes are tracked as messages are appended, so token estimates cost the same at any length;
    a history made with messages copies the list and counts them (unless `chars` is given).
    """

    messages: list[Message] = field(default_factory=list)
    chars: int = 0
    reported_tokens: int | None = None
    """Context size the provider last reported (input + output tokens of the last request)."""
    chars_at_report: int = 0
    compacted_at: int | None = None
    """Length of the history right after its last compaction (to tell "just compacted")."""
    encoded: EncodedMessages | None = field(default=None, compare=False, repr=False)
    """The JSON of its messages as its last snapshot wrote or read them (a cache: valid for as
    many of `messages` as are still the objects it names)."""

    customs: int = 0
    """How many of its messages are the app's `CustomMessage`s (`replay` counts them in)."""

    def __post_init__(self) -> None:
        self.messages = list(self.messages)  # the caller's list stays the caller's
        self.customs = sum(type(m) is CustomMessage for m in self.messages)
        if self.messages and not self.chars:
            self.chars = sum(map(message_chars, self.messages))

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.chars += message_chars(message)

    def note_usage(self, usage: Usage | None) -> None:
        if usage is not None and usage.input_tokens:
            self.reported_tokens = usage.input_tokens + usage.output_tokens
            self.chars_at_report = self.chars

    def used_tokens(self) -> int:
        """Tokens the next request will carry: the last report plus an estimate of the rest."""
        if self.reported_tokens is None:
            return self.chars // 4
        return self.reported_tokens + (self.chars - self.chars_at_report) // 4
