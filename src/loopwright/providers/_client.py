"""The SDK client a provider model owns: built lazily, once per event loop, and closed by
`aclose`.

Every SDK client is created with `max_retries=0` (the loop retries, SPEC §3.8) and the
endpoint's timeout, which bounds both the wait for the first byte and any silence inside a
stream. Its connection pool belongs to one event loop, so a model used again under a new loop
(`run_sync` twice, say) builds a new client instead of failing its first request with "Event
loop is closed". An `http_client` passed in stays its owner's: `aclose` never closes it.

A key asked for per request (`_keys.KeySource`) is sent on a copy of the client sharing its pool
(`request`): when the provider answers 401 the request is made once more with a fresh key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import httpx2

from .. import redact
from ..model_settings import ModelSettings
from ._endpoint import Endpoint
from ._keys import KeySource
from ._settings import Fields
from ._windows import read_window

Client = TypeVar("Client")
Reply = TypeVar("Reply")
PLACEHOLDER = "asked-per-request"
"""The key a client is built with when its requests carry their own (`ClientModel.request`)."""
log = logging.getLogger("loopwright.providers")


class ClientModel(Generic[Client]):
    """A model at an endpoint, through one SDK client (`_build` makes it)."""

    NATIVE_OUTPUT = ("openai", "openai-responses", "anthropic")
    """The endpoints known to take a JSON Schema output format (each dialect sends it in its own
    field). Compatible servers vary (DeepSeek takes none): they get the final-answer tool,
    unless the agent says `output_mode: native`."""

    @property
    def native_output(self) -> bool:
        return self.endpoint.name in self.NATIVE_OUTPUT

    def __init__(
        self,
        endpoint: Endpoint,
        model: str,
        *,
        api_key: str | KeySource,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.model = model
        self.http_client = http_client
        """The HTTP client given to the model, if any; whoever made it closes it."""
        self._keys = api_key if isinstance(api_key, KeySource) else None
        if isinstance(api_key, str):
            redact.register(api_key)  # never in what leaves the process or is stored (P11)
        self._api_key = api_key if isinstance(api_key, str) else PLACEHOLDER
        self._sdk: Client | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._window: int | None = None  # as the server said (`read_context_window`)
        self._window_read = False

    @property
    def context_window(self) -> int | None:
        """This model's context window: as config states it, else as the server said (once
        `read_context_window` read it), else None (the catalog's, `loop.budget`)."""
        return self.endpoint.window(self.model) or self._window

    async def read_context_window(self) -> int | None:
        """Read the window from the endpoint's server, once per model (`_windows`)."""
        if not self._window_read and self.endpoint.window(self.model) is None:
            self._window = await read_window(self.endpoint, self.model, self.http_client)
            self._window_read = True  # (not when cancelled: the next run reads it)
        return self.context_window

    @property
    def name(self) -> str:
        """The `provider:model` string."""
        return f"{self.endpoint.name}:{self.model}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def _build(self, **options: Any) -> Client:
        raise NotImplementedError

    def _fields(self, settings: ModelSettings, session: str | None) -> Fields:
        """The settings as body fields and extra body (`_settings`); raises `ConfigError`."""
        raise NotImplementedError

    def check_settings(self, settings: ModelSettings) -> None:
        """Raise `ConfigError` for a setting this model cannot take (a run calls it first)."""
        self._fields(settings, None)

    def _client(self) -> Client:
        """The SDK client, built on first use in this event loop (a `None` base URL lets the
        SDK read its `*_BASE_URL` variable)."""
        loop = asyncio.get_running_loop()
        if self._sdk is None or self._loop is not loop:
            self._loop = loop
            self._sdk = self._build(
                api_key=self._api_key,
                base_url=self.endpoint.base_url,
                max_retries=0,
                timeout=self.endpoint.timeout,
                http_client=self.http_client,
            )
        return self._sdk

    async def request(self, send: Callable[[Client], Awaitable[Reply]]) -> Reply:
        """`send(client)`, with the key of the moment when it is asked for per request; a 401
        sends it once more with a fresh key. Raises what the SDK raises, or `KeyUnavailable`."""
        client, keys = self._client(), self._keys
        if keys is None:
            return await send(client)
        key = await keys.get()
        try:
            return await send(self._keyed(client, key))
        except Exception as exc:
            if getattr(exc, "status_code", None) != 401:
                raise
        log.info("%s answered 401: asking %s for a fresh key", self.endpoint.name, keys.name)
        return await send(self._keyed(client, await keys.renew(key)))

    def _keyed(self, client: Client, key: str) -> Client:
        """The client sending `key` (a copy sharing the connection pool)."""
        return client.with_options(api_key=key)  # type: ignore[attr-defined, no-any-return]

    async def aclose(self) -> None:
        """Close the connection pool (a pool left by an earlier event loop can only be
        dropped; an `http_client` passed in is left to its owner)."""
        sdk, self._sdk = self._sdk, None
        if sdk is None or self.http_client is not None:
            return
        if self._loop is asyncio.get_running_loop():
            await sdk.close()  # type: ignore[attr-defined]
