"""The client side of a JSON-RPC connection, shared by the in-memory server harness
(tests/server/server_harness.py) and the pipe client of the end-to-end tests
(tests/e2e/helpers.py): they differ only in how a message is sent and received.

``call`` sends a request and returns its response, keeping the notifications that arrive
first in ``notifications``, stashing other responses for later ``receive``s, and answering
server → client requests (``session/request_permission``) with ``on_request``.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

JsonDict = dict[str, Any]
RequestHandler = Callable[[JsonDict], Awaitable[JsonDict | None] | JsonDict | None]
"""Answers a server → client request: its result dict, or None to leave it unanswered."""


class JsonRpcPeer:
    """Request ids, the stash of early responses, and server requests; subclasses move bytes."""

    keep_session_info_apart = False
    """When true, ``session_info_update`` notifications (a session's title, sent by its first
    prompt and after a load's history) go to ``session_info`` and are never returned by
    ``receive`` nor kept in ``notifications``: what most end-to-end tests read is what a turn
    streamed."""

    keep_commands_apart = True
    """When true, ``available_commands_update`` notifications (a session's slash commands,
    sent after session/new, load and resume) go to ``commands`` and are never returned by
    ``receive`` nor kept in ``notifications``."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.session_info: list[JsonDict] = []
        self.commands: list[JsonDict] = []
        self.notifications: list[JsonDict] = []
        self.server_requests: list[JsonDict] = []
        self._stashed: list[JsonDict] = []
        self.on_request: RequestHandler | None = None
        """Default answerer of server requests (``wait_response`` may name another)."""

    async def send_raw(self, text: str) -> None:
        raise NotImplementedError

    async def _next_message(self) -> JsonDict:
        """The next message off the connection (no stash, no timeout)."""
        raise NotImplementedError

    async def send(self, message: Mapping[str, Any]) -> None:
        await self.send_raw(json.dumps(message))

    async def request(self, method: str, params: Any = None, *, request_id: Any = None) -> Any:
        """Send a request without waiting; returns its id."""
        if request_id is None:
            request_id = next(self._ids)
        message: JsonDict = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return request_id

    async def notify(self, method: str, params: Any = None) -> None:
        message: JsonDict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def receive(self) -> JsonDict:
        """The next message, stashed ones first."""
        return await self._stashed_or_next()

    async def _stashed_or_next(self) -> JsonDict:
        if self._stashed:
            return self._stashed.pop(0)
        while True:
            message = await self._next_message()
            if self.keep_commands_apart and is_update_of_kind(message, COMMANDS_UPDATE):
                self.commands.append(message)
            elif self.keep_session_info_apart and is_session_info(message):
                self.session_info.append(message)
            else:
                return message

    async def wait_response(
        self, request_id: Any, *, on_request: RequestHandler | None = None
    ) -> JsonDict:
        """Read until the response to ``request_id`` (see the module docstring)."""
        answer = on_request or self.on_request
        stash: list[JsonDict] = []
        try:
            while True:
                message = await self._stashed_or_next()
                if "method" in message and "id" in message:
                    self.server_requests.append(message)
                    if answer is not None:
                        result = answer(message)
                        if inspect.isawaitable(result):
                            result = await result
                        if result is not None:
                            await self.send(
                                {"jsonrpc": "2.0", "id": message["id"], "result": result}
                            )
                elif "method" in message:
                    self.notifications.append(message)
                elif message.get("id") == request_id:
                    return message
                else:
                    stash.append(message)
        finally:
            self._stashed[:0] = stash

    async def call(
        self, method: str, params: Any = None, *, on_request: RequestHandler | None = None
    ) -> JsonDict:
        """Send a request and return its whole response message (result or error)."""
        request_id = await self.request(method, params)
        return await self.wait_response(request_id, on_request=on_request)

    async def result(self, method: str, params: Any = None) -> Any:
        response = await self.call(method, params)
        assert "result" in response, response
        return response["result"]

    async def error(self, method: str, params: Any = None) -> JsonDict:
        response = await self.call(method, params)
        assert "error" in response, response
        error: JsonDict = response["error"]
        return error

    async def prompt_request(self, session_id: str, prompt: Any) -> Any:
        """Send ``session/prompt`` without waiting; returns its request id."""
        return await self.request("session/prompt", {"sessionId": session_id, "prompt": prompt})

    async def prompt(self, session_id: str, prompt: Any, **options: Any) -> JsonDict:
        """One ``session/prompt`` turn: its whole response (``options`` go to ``call``)."""
        return await self.call(
            "session/prompt", {"sessionId": session_id, "prompt": prompt}, **options
        )


COMMANDS_UPDATE = "available_commands_update"


def is_session_info(message: JsonDict) -> bool:
    return is_update_of_kind(message, "session_info_update")


def is_side_notice(message: JsonDict) -> bool:
    """A session's title or its slash commands: what end-to-end tests read apart."""
    return is_session_info(message) or is_update_of_kind(message, COMMANDS_UPDATE)


def is_update_of_kind(message: JsonDict, kind: str) -> bool:
    params = message.get("params")
    return (
        message.get("method") == "session/update"
        and isinstance(params, dict)
        and isinstance(params.get("update"), dict)
        and params["update"].get("sessionUpdate") == kind
    )
