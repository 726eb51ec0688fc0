"""`loopwright sessions watch --url URL [--token T] [--agent NAME] [--json]`: a server's session
lifecycle notifications (`GET /lifecycle`: created, status, disposed), one line each (or JSON
lines), until Ctrl-C.

It follows a server, not the project's log: the notifications are published by the runtime that
runs the sessions (`runtime.lifecycle`), and a runtime this command opened on the project, as
the other `sessions` commands do, would run none of them (another process's runs are never
seen there). Needs httpx (`pip install 'loopwright[client]'`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .common import CliError, add_json_option, opt, print_json

TOKEN_ENV = "LOOPWRIGHT_TOKEN"


def add_action(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`sessions watch` (beside `sessions show`, `export`, `compact`, `fork`)."""
    parser = actions.add_parser(
        "watch",
        help="follow a server's sessions live: created, status changes, disposed",
        description="Print a server's session lifecycle notifications as they come (GET "
        "/lifecycle on URL, the token's tenant): a session created, its status changing "
        "(running, waiting, paused, idle, interrupted) and disposed, one line each, until "
        "Ctrl-C. It follows the server that runs the sessions: a run in another process is "
        "not seen by a runtime opened on the project.",
    )
    parser.add_argument(
        "--url", metavar="URL", required=True, help="the server, e.g. http://127.0.0.1:8000"
    )
    parser.add_argument(
        "--token", metavar="TOKEN", help=f"the bearer token (default: ${TOKEN_ENV}, if set)"
    )
    parser.add_argument("--agent", metavar="NAME", help="only this agent's sessions")
    add_json_option(parser, "each notification as a JSON line")
    parser.set_defaults(handler=watch_command)


def watch_command(args: argparse.Namespace) -> int:
    try:
        import httpx
    except ImportError:
        raise CliError(
            "`sessions watch` needs httpx", hint="pip install 'loopwright[client]'"
        ) from None
    from ..client.feed import FrameReader

    url = f"{args.url.rstrip('/')}/lifecycle"
    headers = {"Accept": "text/event-stream"}
    if token := args.token or os.environ.get(TOKEN_ENV):
        headers["Authorization"] = f"Bearer {token}"
    try:
        with httpx.stream(
            "GET", url, headers=headers, timeout=httpx.Timeout(10.0, read=None)
        ) as response:
            if response.status_code != 200:
                response.read()
                raise CliError(
                    f"GET {url} answered {response.status_code}: {_error_of(response)}",
                    hint="check --url and --token (lifecycle is on the full profile only)",
                )
            print(f"watching {url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
            reader = FrameReader()
            for line in response.iter_lines():
                if (framed := reader.line(line)) is None:
                    continue
                event = json.loads(framed[1])
                if args.agent is not None and event.get("agent") != args.agent:
                    continue
                if opt(args, "json"):
                    print_json(event)
                else:
                    print(describe(event))
                sys.stdout.flush()
    except KeyboardInterrupt:
        return 0  # (how a watch ends)
    except httpx.HTTPError as exc:
        raise CliError(
            f"could not follow {url}: {exc}", hint="is `loopwright serve` running there?"
        ) from None
    raise CliError(f"{url}: the server ended the stream", hint="it stopped: watch again")


def describe(event: dict[str, Any]) -> str:
    """A notification as a person reads it: `AGENT SESSION what`."""
    where = f"{event.get('agent')} {event.get('sessionId')}"
    match event.get("type"):
        case "session:created":
            source = event.get("forkedFrom")
            fork = f" (forked from {source['sessionId']} at #{source['seq']})" if source else ""
            return f"{where} created{fork}"
        case "session:status":
            previous = event.get("previous")
            return f"{where} {event.get('status')}" + (f" (was {previous})" if previous else "")
        case "session:disposed":
            return f"{where} disposed: {event.get('reason')}"
        case other:
            return f"{where} {other}"


def _error_of(response: Any) -> str:
    try:
        return str(response.json().get("error", response.text))
    except ValueError:
        return str(response.text)[:200]
