"""`mcp.json`: which MCP servers an agent uses, in the file format other MCP clients share.

    {"mcpServers": {
        "time":   {"command": "python", "args": ["-m", "mcp_server_time"],
                   "env": {"TZ": "UTC"}, "cwd": "."},
        "github": {"url": "https://api.example.com/mcp",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}

`${VAR}` (or `${VAR:-default}`) in any string is replaced from the environment when the file is
read. A file that is not valid raises one `ConfigError` naming the file and the key; the values
of `env`, `headers` and `url` are secrets and never appear in an error (nor does what a
variable expanded to). Parsing needs nothing of the `mcp` SDK: a project without MCP servers
never imports it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..sandbox import Sandbox

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_STDIO_KEYS = {"command", "args", "env", "cwd", "type", "timeout"}
_HTTP_KEYS = {"url", "headers", "type", "timeout"}


@dataclass(frozen=True, slots=True, kw_only=True)
class StdioServer:
    """A server run as a subprocess, spoken to over its stdin and stdout."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Set over the SDK's default environment (PATH, HOME...): the server does not inherit
    the rest of ours, so secrets reach only the server they are given to."""
    cwd: str | None = None
    timeout: float | None = None
    """Seconds a call may take (None: the agent's tool timeout)."""
    sandboxed: bool = False
    """Run under bubblewrap: `command` is bwrap, the server's own command line is in `args`."""

    def secrets(self) -> tuple[str, ...]:
        return tuple(v for v in self.env.values() if len(v) >= 4)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpServer:
    """A server reached over streamable HTTP."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None

    def secrets(self) -> tuple[str, ...]:
        values = [v for v in self.headers.values() if len(v) >= 4]
        query = self.url.partition("?")[2]
        return (*values, *([query] if query else []))


ServerConfig = StdioServer | HttpServer


def in_sandbox(config: StdioServer, sandbox: Sandbox) -> StdioServer:
    """`config` run under `sandbox`, in its workspace for `mcp-<name>` (docs/sandbox.md); its
    `env` is passed into the sandbox (and still redacted from what is shown)."""
    from ..sandbox.bwrap import wrap

    where = sandbox.workspace_for(f"mcp-{config.name}")
    argv = wrap(sandbox, where, [config.command, *config.args], config.env)
    return replace(config, command=argv[0], args=tuple(argv[1:]), cwd=where, sandboxed=True)


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers of an `mcp.json` file, variables expanded from `environ` (default
    `os.environ`); `ConfigError` naming the file and the key when it is not valid."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=source) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"invalid JSON: {_json_error(exc)}", source=source) from None
    return parse_config(data, source, os.environ if environ is None else environ)


def parse_config(data: Any, source: str, environ: Mapping[str, str]) -> list[ServerConfig]:
    """The servers of an already parsed `mcp.json` document."""
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError('expected {"mcpServers": {"<name>": {...}}}', source=source)
    servers: list[ServerConfig] = []
    for name, entry in data["mcpServers"].items():
        where = f"mcpServers.{name}"
        if not _SERVER_NAME.match(name):
            raise ConfigError(
                f"{where}: a server's name is 1-40 letters, digits, _ or - (it becomes part "
                "of its tools' names, mcp__<server>__<tool>)",
                source=source,
            )
        servers.append(_server(name, entry, where, source, environ))
    return servers


def _server(
    name: str, entry: Any, where: str, source: str, environ: Mapping[str, str]
) -> ServerConfig:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected an object", source=source)
    kind = entry.get("type")
    is_http = "url" in entry
    if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        raise ConfigError(
            f"{where}.type: expected 'stdio' or 'http' (SSE is not supported)", source=source
        )
    if is_http == ("command" in entry):
        raise ConfigError(f"{where}: give either 'command' (stdio) or 'url' (HTTP)", source=source)
    allowed = _HTTP_KEYS if is_http else _STDIO_KEYS
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(allowed))})",
            source=source,
        )
    expand = _Expander(environ, source)
    timeout = _timeout(entry.get("timeout"), f"{where}.timeout", source)
    if is_http:
        url = expand.text(entry["url"], f"{where}.url", secret=True)
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.url: expected an http:// or https:// URL", source=source)
        headers = expand.mapping(entry.get("headers"), f"{where}.headers")
        return HttpServer(name=name, url=url, headers=headers, timeout=timeout)
    command = expand.text(entry["command"], f"{where}.command", secret=False)
    if not command:
        raise ConfigError(f"{where}.command: must not be empty", source=source)
    args = entry.get("args", [])
    if not isinstance(args, list):
        raise ConfigError(f"{where}.args: expected a list of strings", source=source)
    cwd = entry.get("cwd")
    return StdioServer(
        name=name,
        command=command,
        args=tuple(expand.text(a, f"{where}.args[{i}]", secret=False) for i, a in enumerate(args)),
        env=expand.mapping(entry.get("env"), f"{where}.env"),
        cwd=None if cwd is None else expand.text(cwd, f"{where}.cwd", secret=False),
        timeout=timeout,
    )


@dataclass(slots=True)
class _Expander:
    """`${VAR}` and `${VAR:-default}` from the environment, with errors that name the key and
    the variable, never a value."""

    environ: Mapping[str, str]
    source: str

    def text(self, value: Any, where: str, *, secret: bool) -> str:
        if not isinstance(value, str):
            shown = "" if secret else f", not {type(value).__name__}"
            raise ConfigError(f"{where}: expected a string{shown}", source=self.source)

        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{where}: environment variable {name} is not set", source=self.source
            )

        return _VAR.sub(one, value)

    def mapping(self, value: Any, where: str) -> dict[str, str]:
        """`env` or `headers`: an object of strings, every value a secret."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected an object of strings", source=self.source)
        return {
            str(key): self.text(item, f"{where}.{key}", secret=True) for key, item in value.items()
        }


def _timeout(value: Any, where: str, source: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: expected a positive number of seconds", source=source)
    return float(value)


def _json_error(exc: Exception) -> str:
    """Where the JSON is broken, without quoting the document (it may hold secrets)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return type(exc).__name__


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret replaced by `***` (errors from a server's transport may quote
    a header or a URL)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
