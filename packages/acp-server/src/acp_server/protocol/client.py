"""The client side of one JSON-RPC connection: the peer `zeroclaw prompt` drives an agent
with (``cli/agent_client.py``) and the one the test kit drives a server with
(``acp_server.testing``).

Both sit on ``acp_core.RpcConnection``: it allocates request ids (``<prefix>N``), keeps
which of ours await an answer and matches responses by the text of their id. The peer adds
what a trio program needs around it, in two styles over the same state:

- **pull** (tests): ``request`` / ``notify`` send; ``receive`` returns the next message as
  the dict on the wire; ``wait_response`` reads until one request's response, keeping the
  notifications that come first in ``notifications``, stashing other responses for later
  ``receive``s and answering server → client requests (``session/request_permission``)
  with ``on_request``;
- **push** (an application): ``serve`` reads in the background and hands notifications and
  server requests to callbacks, while any task awaits ``request_result``.

Subclasses carry messages another way by overriding ``send_raw`` and ``_next_message``;
by default they go over a ``MessageTransport`` (one JSON text per message).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import trio

from acp_core import methods
from acp_core.connection import (
    NotificationReceived,
    RequestReceived,
    ResponseReceived,
    RpcConnection,
)
from acp_core.errors import MethodNotFoundError, RemoteProtocolError, RpcError
from acp_core.jsonrpc import ErrorResponse, Notification, Request
from acp_server.protocol.transport import MessageTransport

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]
RequestHandler = Callable[[JsonDict], Awaitable[JsonDict | None] | JsonDict | None]
"""Answers a server → client request: its result dict, or None to leave it unanswered."""
NotificationHandler = Callable[[Notification], None]
CallHandler = Callable[[Request], Awaitable[Any]]
"""Answers a request in push mode: its result, or raises an ``RpcError``."""

DEFAULT_CLIENT_ID_PREFIX: Final = "client-"
COMMANDS_UPDATE: Final = "available_commands_update"
SESSION_INFO_UPDATE: Final = "session_info_update"


class PeerClosed(Exception):
    """The other side closed the connection before answering."""


class ErrorReply(Exception):
    """The other side answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message


class JsonRpcPeer:
    """Request ids, the stash of early responses and server requests over one connection."""

    keep_session_info_apart = False
    """When true, ``session_info_update`` notifications (a session's title, sent by its first
    prompt and after a load's history) go to ``session_info`` and are never returned by
    ``receive`` nor kept in ``notifications``."""

    keep_commands_apart = True
    """When true, ``available_commands_update`` notifications (a session's slash commands,
    sent after session/new, load and resume) go to ``commands`` and are never returned by
    ``receive`` nor kept in ``notifications``."""

    def __init__(
        self,
        transport: MessageTransport | None = None,
        *,
        id_prefix: str = DEFAULT_CLIENT_ID_PREFIX,
    ) -> None:
        self.transport = transport
        self.rpc = RpcConnection(outbound_id_prefix=id_prefix)
        self.session_info: list[JsonDict] = []
        self.commands: list[JsonDict] = []
        self.notifications: list[JsonDict] = []
        self.server_requests: list[JsonDict] = []
        self._stashed: list[JsonDict] = []
        self._waiting: dict[str, trio.MemorySendChannel[Any]] = {}
        self.on_request: RequestHandler | None = None
        """Default answerer of server requests (``wait_response`` may name another)."""

    # ------------------------------------------------------------------ moving messages

    async def send_raw(self, text: str) -> None:
        """Send one message's JSON text as it is (tests send malformed ones on purpose)."""
        if self.transport is None:
            raise NotImplementedError("no transport: override send_raw")
        await self.transport.send_message(text.encode())

    async def _send_encoded(self, payload: bytes) -> None:
        # Text, as every transport of the peer takes it (a WebSocket text frame, a line).
        await self.send_raw(payload.decode())

    async def _next_text(self) -> str:
        """The next message's text. Raises PeerClosed at the end of the stream."""
        if self.transport is None:
            raise NotImplementedError("no transport: override _next_message")
        text = await self.transport.receive_message()
        if text is None:
            raise PeerClosed("the other side closed the connection")
        return text

    async def _next_message(self) -> JsonDict:
        """The next message off the connection (no stash, no timeout)."""
        message: JsonDict = json.loads(await self._next_text())
        return message

    # ------------------------------------------------------------------ pull style

    async def send(self, message: Mapping[str, Any]) -> None:
        """Send one message given as the dict on the wire: every message of the pull style
        goes through here (a test may wrap it to see what the client sent)."""
        await self.send_raw(json.dumps(message))

    async def request(self, method: str, params: Any = None, *, request_id: Any = None) -> Any:
        """Send a request without waiting; returns its id (``request_id`` when given,
        else the next of ``RpcConnection``'s, which then awaits its answer)."""
        if request_id is None:
            request_id = self.rpc.allocate_request_id(method)
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
            if "method" not in message and "id" in message:
                # A response: ours is no longer waiting (matched as RpcConnection does).
                self.rpc.forget_request(_id_text(message["id"]))
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
                elif message.get("id") == request_id:  # as sent: a server must echo it
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
        return await self.request(
            methods.SESSION_PROMPT, {"sessionId": session_id, "prompt": prompt}
        )

    async def prompt(self, session_id: str, prompt: Any, **options: Any) -> JsonDict:
        """One ``session/prompt`` turn: its whole response (``options`` go to ``call``)."""
        return await self.call(
            methods.SESSION_PROMPT, {"sessionId": session_id, "prompt": prompt}, **options
        )

    # ------------------------------------------------------------------ push style

    async def request_result(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result while ``serve`` reads.

        Raises:
            ErrorReply: the other side answered with an error (its code and message).
            PeerClosed: the connection ended first.
        """
        request_id, payload = self.rpc.send_request(method, params)
        send, receive = trio.open_memory_channel[Any](1)
        self._waiting[request_id] = send
        try:
            await self._send_encoded(payload)
            async with receive:
                try:
                    response = await receive.receive()
                except trio.EndOfChannel:
                    raise PeerClosed(f"the connection ended before {method} was answered") from None
        finally:
            self._waiting.pop(request_id, None)
            self.rpc.forget_request(request_id)
        if isinstance(response, ErrorResponse):
            raise ErrorReply(response.error.code, response.error.message)
        return response.result

    async def serve(
        self,
        *,
        on_notification: NotificationHandler,
        on_call: CallHandler,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read until the connection ends: responses go to their ``request_result``,
        notifications to ``on_notification``, each server request to its own task running
        ``on_call`` (so a slow answer, a person at a terminal, holds up nothing)."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            try:
                while True:
                    try:
                        text = await self._next_text()
                    except PeerClosed:
                        break
                    except RemoteProtocolError as exc:
                        logger.warning("unreadable message from the other side: %s", exc)
                        continue
                    self._dispatch(text, nursery, on_notification, on_call)
            finally:
                for channel in self._waiting.values():
                    channel.close()

    def _dispatch(
        self,
        text: str,
        nursery: trio.Nursery,
        on_notification: NotificationHandler,
        on_call: CallHandler,
    ) -> None:
        try:
            event = self.rpc.receive(text)
        except RemoteProtocolError as exc:
            logger.warning("bad message from the other side: %s", exc)
            return
        if isinstance(event, ResponseReceived):
            channel = self._waiting.get(event.request_id)
            if channel is not None:
                channel.send_nowait(event.response)
        elif isinstance(event, NotificationReceived):
            on_notification(event.notification)
        elif isinstance(event, RequestReceived):
            nursery.start_soon(self._answer, event.request, on_call)

    async def _answer(self, request: Request, on_call: CallHandler) -> None:
        try:
            result = await on_call(request)
        except RpcError as error:
            await self._send_encoded(self.rpc.send_error(request.id, error))
            return
        await self._send_encoded(self.rpc.send_result(request.id, result))


def not_handled(request: Request) -> RpcError:
    """The answer to a server request this client does not serve (-32601)."""
    return MethodNotFoundError(request.method)


def _id_text(request_id: Any) -> str:
    """An id as ``RpcConnection`` matches it: ``3``, ``3.0`` and ``"3"`` alike."""
    if isinstance(request_id, float) and request_id.is_integer():
        return str(int(request_id))
    return str(request_id)


def is_session_info(message: JsonDict) -> bool:
    return is_update_of_kind(message, SESSION_INFO_UPDATE)


def is_side_notice(message: JsonDict) -> bool:
    """A session's title or its slash commands: what end-to-end tests read apart."""
    return is_session_info(message) or is_update_of_kind(message, COMMANDS_UPDATE)


def is_update_of_kind(message: JsonDict, kind: str) -> bool:
    params = message.get("params")
    return (
        message.get("method") == methods.SESSION_UPDATE
        and isinstance(params, dict)
        and isinstance(params.get("update"), dict)
        and params["update"].get("sessionUpdate") == kind
    )
