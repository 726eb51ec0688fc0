"""Approval links' pages, the notifications listing, and the server's delivery worker.

`GET /links/<token>` shows one open item (tool, arguments, reason) and a form: Approve / Deny
with an optional reason, or an answer for a question. It decides nothing — a link scanner that
fetches every URL of a message approves nothing. The form's `POST /links/<token>/decide` decides,
through `Runtime.resolve`, the single-use authority every other path uses: the first decision
wins, and a link of an item already decided (by this link or any other way) is refused with
409. A token that is not ours is 403, an expired one 410. The token is the credential (the
route needs no bearer token); the Host and Origin checks apply as everywhere (a page of another
site cannot post the form), and the answers are never cached.

`GET /notifications` lists the tenant's webhook deliveries and every attempt (`?item=<id>`), a
page at a time as every listing (`?limit`, `?cursor`, answering `nextCursor`: `pages`): only the
tenant's own, and a target that is a URL (an unnamed webhook) only as its origin
(`notify.config.public_name`).
"""

from __future__ import annotations

import html
import json
import time
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from .. import notify, redact
from ..approvals import Answer, Approval
from ..errors import ConfigError, UnknownPending
from ..notify.config import NotifySettings, public_name
from ..notify.signing import LinkClaim, check
from ..store import PendingRecord
from ..store.outbox import Delivery
from . import pages
from .state import State, state_of
from .views import tenant_of

NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "same-origin"}
"""The links' pages: never cached; and `same-origin`, not `no-referrer`, for the form's POST to
carry its page's Origin (browsers send `Origin: null` under `no-referrer`, and the Host check
refuses a request that changes something from another origin); the token leaves in no Referer
to another site."""
_PAGE = {"schema": {"type": "string"}}
_ERROR = {"schema": {"$ref": "#/components/schemas/Error"}}
_SAID = {
    "200": "The page (GET), or the decision made (POST).",
    "400": "No valid action (or answer) in the form.",
    "403": "A link not signed by this server (or the Host check).",
    "404": "The item does not exist.",
    "409": "The item was decided already: the link is used up.",
    "410": "The link expired.",
    "413": "The form is over the body limit.",
    "503": "The server serves all the requests it may at once.",
}
_ANSWERS = {
    code: {"description": text, "content": {"text/html": _PAGE, "application/json": _ERROR}}
    for code, text in _SAID.items()
}
_TOKEN = {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}}
_FORM = {
    "type": "object",
    "required": ["action"],
    "properties": {
        "action": {"enum": ["approve", "deny", "answer"]},
        "reason": {"type": "string"},
        "answer": {"type": "string"},
    },
}
PATHS = {
    "/links/{token}": {
        "get": {
            "summary": "An approval link's page (decides nothing)",
            "parameters": [_TOKEN],
            "responses": {k: v for k, v in _ANSWERS.items() if k not in ("400", "413")},
        }
    },
    "/links/{token}/decide": {
        "post": {
            "summary": "Decide through an approval link's form (once)",
            "parameters": [_TOKEN],
            "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": _FORM}}},
            "responses": _ANSWERS,
        }
    },
}
"""The OpenAPI document's entries for the links (`server.openapi`). Its answers are HTML
pages (the Host check's and the budget's are JSON)."""


async def start_worker(state: State) -> notify.Deliverer | None:
    """The server's delivery worker (None without `[[notify.webhook]]`)."""
    return await notify.start(state.project.settings, state.runtime, base_url(state))


def base_url(state: State) -> str:
    host = state.settings.host
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    return f"http://{f'[{host}]' if ':' in host else host}:{state.settings.port}"


async def _key(request: Request) -> str:
    """The link key, read once per app (a generated one is stored in the log's database)."""
    key: str | None = getattr(request.app.state, "link_key", None)
    if key is None:
        state = state_of(request)
        settings = NotifySettings.from_project(state.project.settings)
        key = (await notify.links_for(settings, state.runtime, base_url(state))).key
        request.app.state.link_key = key
    return key


async def _claim(request: Request) -> LinkClaim | Response:
    claim = check(request.path_params["token"], await _key(request), time.time())
    if claim == "forged":
        return _page("Invalid link", "<p>This link is not valid for this server.</p>", 403)
    if claim == "expired":
        return _page("Link expired", "<p>This link has expired. Ask for a new one.</p>", 410)
    return claim


async def _open_item(request: Request) -> tuple[LinkClaim, PendingRecord] | Response:
    claim = await _claim(request)
    if isinstance(claim, Response):
        return claim
    try:
        item = await state_of(request).runtime.item(claim.tenant, claim.item)
    except UnknownPending:
        return _page("Unknown item", "<p>This item does not exist (any more).</p>", 404)
    if item.status != "open":
        return _decided(item)
    return claim, item


async def show(request: Request) -> Response:
    """The confirmation page (a GET decides nothing)."""
    found = await _open_item(request)
    if isinstance(found, Response):
        return found
    _, item = found
    first = request.query_params.get("action")
    args = json.dumps(redact.deep(item.args), indent=2, ensure_ascii=False)
    e = html.escape
    facts = (
        f"<dl><dt>Agent</dt><dd>{e(item.agent)}</dd><dt>Session</dt><dd>{e(item.session_id)}</dd>"
        f"<dt>Tool</dt><dd><code id='tool'>{e(item.tool)}</code></dd>"
        f"<dt>Reason</dt><dd id='reason'>{e(redact.text(item.reason))}</dd></dl>"
        f"<h2>Arguments</h2><pre id='arguments'>{e(args)}</pre>"
    )
    if item.kind == "question":
        form = (
            "<label>Answer <textarea name='answer' id='answer' required></textarea></label>"
            "<button name='action' value='answer' id='answer-button'>Answer</button>"
        )
    else:
        buttons = [
            "<button name='action' value='approve' id='approve'>Approve</button>",
            "<button name='action' value='deny' id='deny'>Deny</button>",
        ]
        if first == "deny":
            buttons.reverse()
        form = (
            "<label>Reason (optional) <input name='reason' id='reason-input' maxlength='2000'>"
            f"</label>{''.join(buttons)}"
        )
    token = html.escape(request.path_params["token"])
    body = f"{facts}<form method='post' action='{token}/decide'>{form}</form>"
    title = "Answer a question" if item.kind == "question" else "Approve a tool call?"
    return _page(title, body, 200)


async def decide(request: Request) -> Response:
    """The form's POST: one decision through the runtime's single-use authority."""
    found = await _open_item(request)
    if isinstance(found, Response):
        return found
    claim, item = found
    state = state_of(request)
    body = await request.body()
    if len(body) > state.settings.max_body_bytes:
        return _page("Too large", "<p>The form is too large.</p>", 413)
    form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
    action = form.get("action", "")
    wanted = ("answer",) if item.kind == "question" else ("approve", "deny")
    if action not in wanted:
        return _page("Bad request", f"<p>Choose one of: {', '.join(wanted)}.</p>", 400)
    decision = _decision(action, form)
    if decision is None:
        return _page("Bad request", "<p>An answer is required.</p>", 400)
    try:
        result = await state.runtime.resolve(claim.tenant, item.id, decision)
    except ConfigError as exc:
        return _page("Cannot decide here", f"<p>{html.escape(str(exc))}</p>", 409)
    if result.status == "already_resolved":
        return _decided(result.item)
    if result.status == "invalid":
        return _page("Refused", f"<p>{html.escape(result.error or 'invalid')}</p>", 400)
    done = {"approve": "Approved", "deny": "Denied", "answer": "Answered"}[action]
    after = (
        "Other items of this run still wait." if result.status == "waiting" else "The run goes on."
    )
    return _page(done, f"<p id='outcome'>{done}. {after}</p>", 200)


def _decision(action: str, form: dict[str, str]) -> Approval | Answer | None:
    by = "link"
    reason = form.get("reason", "").strip() or None
    if action == "approve":  # (its reason is kept as the decision's note)
        return Approval(approved=True, reason=reason, by=by)
    if action == "deny":
        return Approval.deny(reason, by=by)
    text = form.get("answer", "").strip()
    return Answer(text=text, by=by) if text else None


def _decided(item: PendingRecord) -> Response:
    by = html.escape(item.decided_by or "someone")
    text = f"<p id='outcome'>Already {html.escape(item.status)} by {by}: this link is used up.</p>"
    return _page("Already decided", text, 409)


def _page(title: str, body: str, status: int) -> HTMLResponse:
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='robots' content='noindex'><title>{html.escape(title)}</title>"
        "<link rel='icon' href='data:,'><link rel='stylesheet' href='/static/links.css'>"
        "</head>"  # (styled for phones first: static/links.css)
        f"<body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(page, status_code=status, headers=NO_STORE)


async def notifications(request: Request) -> JSONResponse:
    """One page of the tenant's deliveries, newest first, with their attempts (`?limit`,
    `?cursor`: see `pages`)."""
    runtime, tenant = state_of(request).runtime, tenant_of(request)
    item = request.query_params.get("item")
    limit, cursor = pages.limit_of(request), pages.cursor_of(request)

    async def fetch(n: int, cursor: str | None) -> tuple[list[Delivery], str | None]:
        page = await runtime.deliveries(tenant, item=item, limit=n, cursor=cursor)
        return page.items, page.cursor

    found, after = await pages.collect(fetch, limit, cursor)
    return JSONResponse(pages.page_body("deliveries", [_delivery(d) for d in found], after))


def _delivery(d: Delivery) -> dict[str, Any]:
    return {
        "id": d.id,
        "target": public_name(d.target),
        "item": d.notice.item,
        "event": d.notice.event,
        "state": d.state,
        "attempts": d.attempts,
        "lastStatus": d.last_status,
        "lastError": d.last_error,
        "createdAt": d.created_at,
        "deliveredAt": d.delivered_at,
        "tried": [{"n": a.n, "at": a.at, "status": a.status, "error": a.error} for a in d.tried],
    }
