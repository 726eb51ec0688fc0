"""The admin routes (docs/admin.md): for a token with the `admin` role only (`[[auth.token]]
roles = ["admin"]`; 403 for any other), create an agent and read or replace its agent.yaml,
prompt.md, rules.yaml and skills/NAME/SKILL.md.

A new version of a file is checked first: the agent folder is copied to a temporary one with
the file replaced and loaded there, so the answer to a mistake is the loader's own error with
its line (422). A version that loads is written atomically (a temporary file, then
`os.replace`) and the project is loaded again in this process, as `loopwright dev` does on a
change (under `dev` its watcher sees the write too): the change is live when the answer comes.
Every change is appended to `.loopwright/admin.log` (one JSON line: when, who, what, the new
text's SHA-256) and logged (`loopwright.admin`)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import ConfigError
from ..gate.rule_tools import check_agent
from ..project import load_agent
from ..project.agent_yaml import BUILTINS, PROMPT_FILE
from ..project.scaffold import Options, agent_files
from .dev import reload
from .guard import ADMIN
from .openapi_schemas import NAME, Schema, as_json, error
from .state import State, state_of
from .views import ApiError, principal_of, read_json, text_field

log = logging.getLogger("loopwright.admin")
FILES = ("agent.yaml", PROMPT_FILE, "rules.yaml")
SKILL = re.compile(r"skills/[a-z0-9]+(?:-[a-z0-9]+)*/SKILL\.md")
AGENT_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
LEFT_OUT = shutil.ignore_patterns("workspace", "__pycache__", ".*")
"""What the check's copy of an agent folder leaves out (the agent's own working files)."""
AUDIT = Path(".loopwright") / "admin.log"


def admin_state(request: Request) -> State:
    """The state, once the request is known to be an admin's (else 403)."""
    if not request.scope.get(ADMIN):
        raise ApiError(403, "the admin role is required")
    return state_of(request)


async def list_agents(request: Request) -> JSONResponse:
    """The agents of `agents/`, each with its editable files that exist, and the built-in
    tools a new agent may get."""
    state = admin_state(request)
    agents = []
    for name in sorted(state.project.agents):
        folder = _folder(state, name)
        if folder is not None and (folder / "agent.yaml").is_file():
            agents.append({"name": name, "files": _files(folder)})
    return JSONResponse({"agents": agents, "builtins": list(BUILTINS)})


async def create_agent(request: Request) -> JSONResponse:
    """A new agent from `name`, `model`, `prompt`, `tools` and `description`, as `loopwright
    new` writes it (201); 409 when the folder exists."""
    state = admin_state(request)
    data = await read_json(request, state.settings.max_body_bytes)
    name = text_field(data, "name", required=True) or ""
    if not AGENT_NAME.fullmatch(name):
        raise ApiError(400, "name must be lowercase words joined by hyphens, like 'order-desk'")
    tools = data.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise ApiError(400, "tools must be a list of strings")
    unknown = [t for t in tools if t not in BUILTINS]
    if unknown:
        raise ApiError(
            400, f"unknown tools: {', '.join(unknown)} (the built-ins: {', '.join(BUILTINS)})"
        )
    options = Options(
        description=text_field(data, "description") or "",
        model=text_field(data, "model") or None,
        prompt=text_field(data, "prompt") or None,
        tools=tuple(dict.fromkeys(tools)),
    )
    agents = state.project.root / "agents"
    target = agents / name
    if target.exists() or name in state.project.agents:
        raise ApiError(409, f"agent '{name}' exists already")
    files = agent_files(name, options, state.project.settings)
    agents.mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=agents))
    try:
        checked = staging / name
        checked.mkdir()
        for file, text in files.items():
            (checked / file).write_text(text)
        if {"files", "files-readonly", "shell"} & set(options.tools):
            (checked / "workspace").mkdir()
        refused = _check(checked, state)
        if refused is not None:
            return refused
        os.replace(checked, target)  # (the whole folder appears at once)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _audit(state, principal_of(request), "create", name, "agent.yaml", files["agent.yaml"])
    return JSONResponse(
        {"name": name, "files": _files(target), "reloaded": _reload(state)}, status_code=201
    )


async def read_file(request: Request) -> JSONResponse:
    state = admin_state(request)
    path = _path(state, request.path_params["name"], request.path_params["file"])
    if not path.is_file():
        raise ApiError(404, f"{request.path_params['file']} does not exist (yet)")
    return JSONResponse({"file": request.path_params["file"], "text": path.read_text()})


async def write_file(request: Request) -> JSONResponse:
    """Check `text` as the loader would load it, then write it and reload (see the module)."""
    state = admin_state(request)
    name, file = request.path_params["name"], request.path_params["file"]
    path = _path(state, name, file)
    data = await read_json(request, state.settings.max_body_bytes)
    text = data.get("text")
    if not isinstance(text, str):
        raise ApiError(400, "text is required (the file's new contents)")
    folder = path.parent if file in FILES else path.parent.parent.parent
    with tempfile.TemporaryDirectory(prefix="loopwright-admin-") as scratch:
        copy = Path(scratch) / folder.name
        shutil.copytree(folder, copy, ignore=LEFT_OUT)
        (copy / file).parent.mkdir(parents=True, exist_ok=True)
        (copy / file).write_text(text)
        refused = _check(copy, state)
    if refused is not None:
        return refused
    _replace(path, text)
    _audit(state, principal_of(request), "write", name, file, text)
    return JSONResponse({"file": file, "reloaded": _reload(state)})


def _check(folder: Path, state: State) -> JSONResponse | None:
    """Load the agent of `folder` (a copy): None, or the loader's error as a 422 (`error`, its
    paths made the agent folder's own; `file` and `line` when it names them)."""
    try:
        check_agent(load_agent(folder, defaults=state.project.settings.get("defaults") or {}))
    except ConfigError as exc:
        message = str(exc).replace(f"{folder}{os.sep}", "")
        source = (exc.source or "").replace(f"{folder}{os.sep}", "")
        where, _, line = source.rpartition(":")
        body: dict[str, Any] = {"error": message}
        if line.isdigit():
            body |= {"file": where, "line": int(line)}
        elif source:
            body["file"] = source
        return JSONResponse(body, status_code=422)
    return None


def _folder(state: State, name: str) -> Path | None:
    """The agent's folder when it is `agents/NAME/` of the project (else None)."""
    folder = state.project.folders.get(name)
    agents = (state.project.root / "agents").resolve()
    if folder is None or folder.resolve().parent != agents:
        return None
    return folder.resolve()


def _path(state: State, name: str, file: str) -> Path:
    """The editable file `file` of agent `name`: 404 for an unknown agent, 400 for any other
    file (nothing outside the agent's folder, no link out of it)."""
    folder = _folder(state, name)
    if folder is None:
        raise ApiError(404, f"unknown agent '{name}'")
    if file not in FILES and not SKILL.fullmatch(file):
        raise ApiError(
            400, f"editable files: {', '.join(FILES)} and skills/NAME/SKILL.md, not {file!r}"
        )
    path = folder / file
    if not path.resolve().is_relative_to(folder):
        raise ApiError(400, f"{file} leads out of the agent's folder")
    return path


def _files(folder: Path) -> list[str]:
    skills = sorted(
        p.relative_to(folder).as_posix() for p in folder.glob("skills/*/SKILL.md") if p.is_file()
    )
    return [f for f in FILES if (folder / f).is_file()] + skills


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: readers see the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o777)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _audit(state: State, who: str, action: str, agent: str, file: str, text: str) -> None:
    """One line appended to `.loopwright/admin.log`, and one logged."""
    entry = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "who": who,
        "action": action,
        "agent": agent,
        "file": file,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    audit = state.project.root / AUDIT
    audit.parent.mkdir(parents=True, exist_ok=True)
    with audit.open("a") as out:
        out.write(json.dumps(entry, separators=(",", ":")) + "\n")
    log.info("admin %s: %s %s/%s", who, action, agent, file)


def _reload(state: State) -> bool:
    """Serve the project as it is on disk now (as `dev` does on a change)."""
    return reload(state, state.project.root, log.info)


_FILE = {"name": "file", "in": "path", "required": True, "schema": {"type": "string"}}
_WHO = error("The token does not have the admin role (or the Host is another server's).")
_TEXT = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
_FILE_BODY = {
    "type": "object",
    "required": ["file", "text"],
    "properties": {"file": {"type": "string"}, "text": {"type": "string"}},
}
_REFUSED = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "file": {"type": "string"},
        "line": {"type": "integer"},
    },
}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_NEW = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "model": {"type": "string"},
        "prompt": {"type": "string"},
        "description": {"type": "string"},
        "tools": _STRINGS,
    },
}
_EVERY = {
    "401": error("A bearer token is required and was not given."),
    "403": _WHO,
    "503": error("The server serves all the requests it may at once (see Retry-After)."),
}
_BODY = {"400": error("Invalid JSON or fields."), "413": error("Body over the limit.")}
_WRITTEN = {
    "type": "object",
    "required": ["file", "reloaded"],
    "properties": {"file": {"type": "string"}, "reloaded": {"type": "boolean"}},
}
_AGENTS = {
    "type": "object",
    "required": ["agents", "builtins"],
    "properties": {
        "agents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "files"],
                "properties": {"name": {"type": "string"}, "files": _STRINGS},
            },
        },
        "builtins": _STRINGS,
    },
}
_CREATED = {
    "type": "object",
    "required": ["name", "files", "reloaded"],
    "properties": {
        "name": {"type": "string"},
        "files": _STRINGS,
        "reloaded": {"type": "boolean"},
    },
}


def _body(schema: Schema) -> Schema:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


PATHS: dict[str, Schema] = {
    "/admin/agents": {
        "get": {
            "summary": "The agents an admin may edit, with their files (admin role)",
            "parameters": [],
            "responses": _EVERY | {"200": as_json(_AGENTS, "The agents and the built-ins.")},
        },
        "post": {
            "summary": "Create an agent, as `loopwright new` does (admin role)",
            "parameters": [],
            "requestBody": _body(_NEW),
            "responses": _EVERY
            | _BODY
            | {
                "201": as_json(_CREATED, "Created, and served."),
                "409": error("The agent exists already."),
                "422": as_json(_REFUSED, "The agent made does not load (the model, say)."),
            },
        },
    },
    "/admin/agents/{name}/files/{file}": {
        "get": {
            "summary": "An agent's file: agent.yaml, prompt.md, rules.yaml, skills/S/SKILL.md",
            "parameters": [NAME, _FILE],
            "responses": _EVERY
            | {
                "200": as_json(_FILE_BODY, "The file's text."),
                "400": error("Not an editable file (or a path out of the agent's folder)."),
                "404": error("Unknown agent, or the file does not exist yet."),
            },
        },
        "put": {
            "summary": "Replace an agent's file once it loads; the agent is served at once",
            "parameters": [NAME, _FILE],
            "requestBody": _body(_TEXT),
            "responses": _EVERY
            | _BODY
            | {
                "200": as_json(_WRITTEN, "Written, logged, and the project reloaded."),
                "404": error("Unknown agent."),
                "422": as_json(_REFUSED, "It does not load: the loader's error and line."),
            },
        },
    },
}
"""The admin operations of the OpenAPI document (`openapi.document`)."""
