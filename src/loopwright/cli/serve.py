"""`loopwright serve` and `loopwright dev`: the project's agents behind HTTP (see
`loopwright.server`), on 127.0.0.1:8787 unless `[server]` or the options say otherwise. `dev`
also reloads the project when its files change. SIGINT or SIGTERM stops the server gracefully:
no new connections, open requests get a few seconds, live runs are cancelled and recorded."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .common import CliError, add_place_options, config_error, place_of
from .logs import redact_handlers

if TYPE_CHECKING:
    import socket

    import uvicorn

    from ..server import State

GRACE_SECONDS = 5


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, reload in (("serve", False), ("dev", True)):
        what = "serve the project's agents over HTTP, with the web playground"
        parser = commands.add_parser(
            name,
            help=what + (" (reloading on changes)" if reload else ""),
            description=(
                "Serve every agent of the project over HTTP (the loopengine v1 routes, SSE, "
                "pending approvals and questions, an OpenAPI document at /openapi.json) and "
                "the web playground at /playground. Binds 127.0.0.1 unless --host or "
                "[server] host says otherwise; with no [auth.tokens] only loopback clients "
                "are served."
                + (
                    " Reloads the project when agents, tools, rules, skills or "
                    "loopwright.toml change."
                    if reload
                    else ""
                )
            ),
        )
        parser.add_argument("--host", metavar="HOST", help="interface to bind (default 127.0.0.1)")
        parser.add_argument(
            "--port", metavar="PORT", type=int, help="port (default 8787; 0 picks a free one)"
        )
        add_place_options(parser, tenant=False)
        parser.set_defaults(handler=serve_command, reload=reload)


def serve_command(args: argparse.Namespace) -> int:
    import asyncio

    from ..notify.config import NotifySettings
    from ..server import ServerSettings, create_app
    from ..server.limits import serve_config

    place = place_of(args)
    place.require_project()
    project = place.project()
    if not project.agents:
        raise CliError(
            f"no agents to serve in {place.root.resolve()} (an agent is a folder "
            "agents/NAME/ holding agent.yaml or agent.py)",
            hint=f"create one with `loopwright new NAME{place.flags()}`, then serve again",
        )
    try:
        settings = ServerSettings.from_project(project.settings, host=args.host, port=args.port)
    except ConfigError as exc:
        raise config_error(exc, hint="fix [server] or [auth] in loopwright.toml") from None
    try:  # (checked again when the app starts: here an error is one line, not a traceback)
        NotifySettings.from_project(project.settings)
    except ConfigError as exc:
        raise config_error(exc, hint="fix [notify] in loopwright.toml") from None
    sock = _listen(settings.host, settings.port)
    settings = dataclasses.replace(settings, port=sock.getsockname()[1])  # (--port 0: links)
    app = create_app(project, settings=settings)
    config = serve_config(  # deadlines for connections; the app counts what it serves
        app,
        settings,
        timeout_graceful_shutdown=GRACE_SECONDS,
        log_level="warning",
        lifespan="on",
    )
    redact_handlers("uvicorn", "uvicorn.error", "uvicorn.access")  # (configured just now)
    server = _server(config, app.state.loopwright)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown}:{port}"
    names = ", ".join(sorted(project.agents)) or "none"
    access = (
        f"{len(settings.tokens)} bearer token(s)" if settings.tokens else "loopback clients only"
    )
    serving = [
        f"loopwright: serving {len(project.agents)} agent(s) ({names}) at {url} ({access})",
        f"playground: {url}/playground",
    ]
    asyncio.run(_serve(server, sock, app.state.loopwright, args.reload, serving))
    say("loopwright: stopped")
    return 0


async def _serve(
    server: uvicorn.Server, sock: socket.socket, state: State, reload: bool, serving: list[str]
) -> None:
    """Open the event log (a bad [store] url is an error now, not at the first request), say
    where it serves, and serve until stopped."""
    import asyncio

    from ..server.app import open_store
    from ..store import StoreError

    try:
        await open_store(state)
    except StoreError as exc:
        sock.close()
        hint = "check [store] in loopwright.toml (or $LOOPWRIGHT_STORE_URL)"
        raise CliError(str(exc), hint=hint) from None
    for line in serving:
        say(line)
    stop = asyncio.Event()
    watcher = None
    if reload:
        from ..server.dev import watch

        watcher = asyncio.create_task(watch(state, state.project.root, stop, say))
    try:
        await server.serve(sockets=[sock])
    finally:
        stop.set()
        if watcher is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(watcher, 2)


def _listen(host: str, port: int) -> socket.socket:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so (without
    # it every small response waits for the peer's delayed ACK, ~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # connections wait from now on, before the app has started
    except OSError as exc:
        sock.close()
        raise CliError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            hint="choose another --port (0 picks a free one) or stop what uses it",
        ) from None
    return sock


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _server(config: uvicorn.Config, state: State) -> uvicorn.Server:
    """uvicorn's server with our signal handling: SIGINT/SIGTERM stop it gracefully (a second
    SIGINT at once), and the process then exits normally (uvicorn would re-raise the signal).
    Stopping first ends the open event streams cleanly (`State.draining`)."""
    import asyncio
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            state.draining.set()  # (open streams end: `sse.EventStream`)
            await super().shutdown(sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            loop = asyncio.get_running_loop()

            def stop(sig: int) -> None:
                if self.should_exit and sig == signal.SIGINT:
                    self.force_exit = True
                self.should_exit = True
                say("loopwright: stopping (Ctrl-C again to stop at once)")

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop, sig)
            try:
                yield
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    return Server(config)
