"""`loopwright approvals link ID`: a signed, single-use, expiring link to an open item's
confirmation page on the server (docs/notify.md), for when no webhook carries it. The link is
signed with the server's link key (`[notify] link_secret_env`, else the key stored in the event
log's database), so the server that shares this project's database honours it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .common import CliError, Place, add_place_options, config_error

if TYPE_CHECKING:
    from ..agent import Agent


def add_link_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    link = actions.add_parser(
        "link",
        help="print a signed, single-use link to approve or deny an item in a browser",
        description="Print a link to the server's confirmation page for an open item: it "
        "shows the call and asks (opening it decides nothing). It expires after [notify] "
        "link_ttl seconds (a day by default) and is used up by the first decision.",
    )
    link.add_argument("id", metavar="ID", help="the pending item's id")
    link.add_argument("--json", action="store_true", help="print every link (approve, deny...)")
    add_place_options(link)


def base_of(settings: Mapping[str, Any]) -> str:
    """The server's address as `[server]` gives it (links' default base)."""
    server = settings.get("server") or {}
    host = server.get("host", "127.0.0.1") if isinstance(server, Mapping) else "127.0.0.1"
    port = server.get("port", 8787) if isinstance(server, Mapping) else 8787
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


async def print_link(place: Place, agents: Mapping[str, Agent], args: argparse.Namespace) -> int:
    from ..notify import NotifySettings, links_for
    from .runner import opened

    project = place.project().settings if place.is_project else {}
    try:
        settings = NotifySettings.from_project(project)
    except ConfigError as exc:
        raise config_error(exc, hint="fix [notify] in loopwright.toml") from None
    async with opened(place, agents) as runtime:
        item = await runtime.item(place.tenant, args.id)
        if item.status != "open":
            raise CliError(f"{item.id} is {item.status} already (by {item.decided_by})")
        links = (await links_for(settings, runtime, base_of(project))).of(item)
    print(json.dumps(links) if args.json else links["page"])
    return 0
