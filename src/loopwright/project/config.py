"""`loopwright.toml`, checked whole by one pydantic model before any of it is used.

Every table a project may have is here: `[server]` and `[auth]` (the HTTP server,
`server.settings`), `[store]`, `[defaults]` (what `agent.yaml` agents start from),
`[providers.NAME]` (`providers`), `[telemetry]`, `[notify]`, `[sandbox]` (the agents' default
sandbox, `sandbox`) and `[titles]` (`runtime.titling`). A key that is none of these is an error
naming the file, the line and the closest valid key; so is a value of the wrong type:

    loopwright.toml:3: [server] unknown key 'prot' (did you mean 'port'?)

The readers of each table (`ServerSettings.from_project`, `NotifySettings.from_project`,
`providers.load_endpoints`, ...) still check what a type cannot say (a port's range, a
variable that must be set), on values this model has let through.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from ..errors import ConfigError


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ServerTable(_Table):
    host: str = ""
    port: int = 0
    max_body_bytes: int = 0
    max_connections: int = 0
    request_timeout: float = 0
    idle_timeout: float = 0
    max_runs_per_tenant: int = 0
    max_streams_per_tenant: int = 0
    allowed_hosts: list[str] = []
    cors_origins: list[str] = []
    profile: Literal["full", "v1"] = "full"


class TokenTable(_Table):
    env: str
    tenant: str
    name: str = ""
    roles: list[Literal["admin"]] = []


class AuthTable(_Table):
    tokens: dict[str, str] = {}
    token: list[TokenTable] = []


class StoreTable(_Table):
    path: str = ""
    url: str = ""
    pool_size: int = 0


class DefaultsTable(_Table):
    model: str = ""
    max_turns: int = 0
    on_deny: Literal["stop", "continue"] = "stop"
    plugins: list[str] = []


class WindowTable(_Table):
    context_window: int


class ProviderTable(_Table):
    base_url: str = ""
    api_key_env: str = ""
    api_key_command: str = ""
    api_key_ttl: float = 0
    api_key_timeout: float = 0
    dialect: str = ""
    timeout: float = 0
    context_window: int = 0
    server: str = ""
    tool_calls_in_text: bool = False
    models: dict[str, WindowTable] = {}


class TelemetryTable(_Table):
    otel: bool = False
    capture_content: bool = False


class WebhookTable(_Table):
    url: str
    secret_env: str = ""
    events: list[str] = []
    name: str = ""
    timeout: float = 0


class NotifyTable(_Table):
    webhook: list[WebhookTable] | WebhookTable = []
    base_url: str = ""
    link_secret_env: str = ""
    link_ttl: float = 0
    max_age: float = 0
    hold: float = 0
    keep: float = 0
    max_attempts: int = 0


class SandboxLimitsTable(_Table):
    cpu_seconds: int = 0
    memory_mb: int = 0
    processes: int = 0
    file_size_mb: int = 0


class SandboxTable(_Table):
    workspace: str = ""
    workspaces: str = ""
    network: Any = "none"  # none | all | a list of hosts: checked by `_network`
    limits: SandboxLimitsTable = SandboxLimitsTable()
    read_only: list[str] = []
    env: dict[str, str] = {}
    user: int = 0
    bwrap: str = ""

    @field_validator("network")
    @classmethod
    def _network(cls, value: Any) -> Any:  # named at its line, as a wrong type is
        from ..sandbox.network import hosts

        if value in ("none", "all"):
            return value
        try:
            hosts(value)
        except ConfigError as exc:
            raise PydanticCustomError(
                "network", str(exc).removeprefix("sandbox network: ")
            ) from None
        return value


class TitlesTable(_Table):
    model: str = ""
    prompt: str = ""


class ProjectConfig(_Table):
    """loopwright.toml: every table and key it may have."""

    server: ServerTable = ServerTable()
    auth: AuthTable = AuthTable()
    store: StoreTable = StoreTable()
    defaults: DefaultsTable = DefaultsTable()
    providers: dict[str, ProviderTable] = {}
    telemetry: TelemetryTable = TelemetryTable()
    notify: NotifyTable = NotifyTable()
    sandbox: SandboxTable = SandboxTable()
    titles: TitlesTable = TitlesTable()


def check(settings: dict[str, Any], text: str, source: str) -> None:
    """`ConfigError` (at `source:LINE`) for the first unknown key or wrong type of
    `settings`, the TOML `text` read from `source`."""
    try:
        ProjectConfig.model_validate(settings)
    except ValidationError as exc:
        error = min(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
        loc = tuple(p for p in error["loc"] if not _is_union_tag(p))
        line = line_of(text, loc)
        raise ConfigError(_message(loc, error), source=f"{source}:{line}") from None


def _is_union_tag(part: Any) -> bool:
    return isinstance(part, str) and part.startswith(("list[", "Webhook"))


def _message(loc: tuple[Any, ...], error: Any) -> str:
    key, table = loc[-1], _table(loc[:-1])
    if loc[:2] == ("auth", "tokens") and len(loc) == 3:
        key = "a token's tenant"  # (never the token itself)
    if error["type"] != "extra_forbidden":
        return f"{table} {key}: {error['msg'].lower()}"
    model = _model_at(loc[:-1])
    valid = sorted(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(str(key), valid, n=1)
    hint = f"did you mean {close[0]!r}?" if close else "valid: " + ", ".join(valid)
    if not loc[:-1]:
        return f"unknown table [{key}] ({hint})"
    return f"{table} unknown key {key!r} ({hint})"


def _table(path: tuple[Any, ...]) -> str:
    """`[server]`, or `[[notify.webhook]] #2` for the second of an array of tables."""
    names = ".".join(str(p) for p in path if not isinstance(p, int))
    at = [p for p in path if isinstance(p, int)]
    return f"[[{names}]] #{at[-1] + 1}" if at else f"[{names}]"


def _model_at(path: tuple[Any, ...]) -> Any:
    """The model of the table at `path` (None if there is none)."""
    node: Any = ProjectConfig
    for part in path:
        if not _is_model(node):  # a container: dict[str, M], list[M] or list[M] | M
            inner = _inner(node)
            if isinstance(part, int) or getattr(node, "__origin__", None) is dict:
                node = inner
                continue
            node = inner
        field = node.model_fields.get(part) if _is_model(node) else None
        node = field.annotation if field is not None else None
    return node if _is_model(node) else _inner(node)


def _is_model(node: Any) -> bool:
    return isinstance(node, type) and issubclass(node, BaseModel)


def _inner(annotation: Any) -> Any:
    """The model inside `dict[str, M]`, `list[M]` or `list[M] | M` (None if there is none)."""
    for arg in getattr(annotation, "__args__", ()):
        if _is_model(arg):
            return arg
        if (found := _inner(arg)) is not None:
            return found
    return None


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=")


def line_of(text: str, loc: tuple[Any, ...]) -> int:
    """The line of `text` (a TOML document) where the key at `loc` is written, else where its
    table starts (the nearest one written), else 1."""
    found: dict[tuple[Any, ...], int] = {}
    table: tuple[Any, ...] = ()
    counts: dict[tuple[Any, ...], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if header := _HEADER.match(line):
            path = _parts(header.group(2))
            if header.group(1) == "[[":
                counts[path] = counts.get(path, -1) + 1
                table = (*path, counts[path])
            else:
                table = path
            found.setdefault(table, number)
        elif key := _KEY.match(line):
            found.setdefault((*table, *_parts(key.group(1))), number)
    for end in range(len(loc), 0, -1):
        if loc[:end] in found:
            return found[loc[:end]]
        if isinstance(loc[end - 1], int) and loc[: end - 1] in found:  # a lone [x.webhook] table
            return found[loc[: end - 1]]
    return 1


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', dotted))
