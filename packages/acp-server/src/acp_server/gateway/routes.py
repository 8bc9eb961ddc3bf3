"""The gateway's route table: path → handler, the methods it takes, and guards by prefix.

Dispatch of one request (``RouteTable.dispatch``): the path must lie under the
``[gateway] path_prefix`` (else 404); every guard whose prefix covers the route runs first
and may answer instead (the admin routes' 403); an unknown route is 404, a known one with
another method 405 with ``Allow``; a POST body is read (bounded in time) before the
handler runs. A route registered with ``methods=None`` checks the method itself (``/acp``
answers 426 to anything but a WebSocket upgrade).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from acp_server.gateway.http import BadRequest, HttpRequest, read_body, send_response


def _no_op() -> None:
    pass


@dataclass(frozen=True, slots=True)
class Exchange:
    """One HTTP request being answered: ``route`` is its path without the prefix, ``peer``
    the real client's address.

    ``authenticated`` is called once the request has earned a long-lived connection (an
    admitted WebSocket upgrade): the socket is no longer counted as pending
    (gateway/pending.py).
    """

    stream: trio.abc.Stream
    request: HttpRequest
    peer: str
    route: str
    authenticated: Callable[[], None] = field(default=_no_op)
    proxy: str | None = None
    """The trusted proxy the request came through (gateway/client_address.py), if any."""

    @property
    def proxied(self) -> bool:
        return self.proxy is not None


Handler = Callable[[Exchange], Awaitable[None]]
Guard = Callable[[Exchange], Awaitable[bool]]
"""Answers the request itself and returns False to stop it, or returns True to go on."""


@dataclass(frozen=True, slots=True)
class Route:
    handler: Handler
    methods: frozenset[str] | None


class RouteTable:
    """Routes by exact path (below the prefix) and guards by path prefix."""

    def __init__(self, *, prefix: str, body_timeout_secs: float) -> None:
        self.prefix = prefix
        self._body_timeout_secs = body_timeout_secs
        self._routes: dict[str, Route] = {}
        self._guards: list[tuple[str, Guard]] = []

    def add(self, path: str, handler: Handler, methods: set[str] | None) -> None:
        self._routes[path] = Route(handler, None if methods is None else frozenset(methods))

    def guard(self, path_prefix: str, guard: Guard) -> None:
        """Run ``guard`` before any request whose route starts with ``path_prefix``."""
        self._guards.append((path_prefix, guard))

    def route_of(self, path: str) -> str | None:
        """``path`` without the prefix (``/`` at least), or None when it is not under it."""
        prefix = self.prefix
        if prefix and not (path == prefix or path.startswith(prefix + "/")):
            return None
        return path[len(prefix) :] or "/"

    async def dispatch(
        self,
        stream: trio.abc.Stream,
        request: HttpRequest,
        peer: str,
        *,
        authenticated: Callable[[], None] = _no_op,
        proxy: str | None = None,
    ) -> None:
        route = self.route_of(request.path)
        if route is None:
            await send_response(stream, 404, "Not found\n")
            return
        exchange = Exchange(stream, request, peer, route, authenticated, proxy)
        for path_prefix, guard in self._guards:
            if route.startswith(path_prefix) and not await guard(exchange):
                return
        entry = self._routes.get(route)
        if entry is None:
            await send_response(stream, 404, "Not found\n")
            return
        if entry.methods is not None and request.method not in entry.methods:
            allow = ", ".join(sorted(entry.methods))
            await send_response(stream, 405, "Method not allowed\n", headers=[("Allow", allow)])
            return
        if entry.methods is not None and request.method == "POST":
            await self._read_body(stream, request)
        await entry.handler(exchange)

    async def _read_body(self, stream: trio.abc.Stream, request: HttpRequest) -> bytes:
        with trio.move_on_after(self._body_timeout_secs):
            return await read_body(stream, request)
        raise BadRequest(408, "the request body did not arrive in time")
