"""`GET /docs`: the HTTP API's reference, a page that renders the server's own OpenAPI document
(`/openapi.json`, `openapi`) with Redoc, vendored under static/vendor-docs/ (no network needed).
Redoc styles its page with `<style>` elements and searches in a worker made from a blob, so the
page's policy allows those two, where every other answer allows neither (`guard.HEADERS`)."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

PAGE = Path(__file__).with_name("static") / "docs.html"
POLICY = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


async def docs(request: Request) -> Response:
    if not PAGE.is_file():
        return JSONResponse({"error": "not found"}, status_code=404)
    return FileResponse(PAGE, media_type="text/html", headers={"Content-Security-Policy": POLICY})
