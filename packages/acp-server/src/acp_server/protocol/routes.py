"""The shape of one inbound method's route: what ``build_routes``
(acp_server/protocol/router.py) builds for every method of ``acp_core.methods.METHODS``
from the services, and the connection (acp_server/protocol/connection.py) runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import msgspec

from acp_core import methods, schema
from acp_core.jsonrpc import Payload
from acp_core.methods import MethodSpec

Job: TypeAlias = Callable[[], Awaitable[Payload]]
"""The concurrent part of a call, started in its own task once admitted."""
InlineHandler: TypeAlias = Callable[[Any, str], Payload]
AdmitHandler: TypeAlias = Callable[[Any, str], Job]
ConcurrentHandler: TypeAlias = Callable[[Any], Awaitable[Payload]]


class Route(msgspec.Struct, frozen=True):
    """One inbound method: its params type and its handler, in the shape ``ordering`` says.

    * ``inline``: ``handler(params, request_key) -> result``, run by the reader;
    * ``admitted``: ``handler(params, request_key) -> job``, the admission run by the
      reader in arrival order, the returned job in a task;
    * ``concurrent``: ``handler(params) -> awaitable result``, in a task.

    ``request_key`` is the call's id as text ("" for a notification), the key of
    ``$/cancel_request``. ``precedence`` (optional) runs on the raw params when they fail
    to decode, for checks that outrank a params error.
    """

    spec: MethodSpec
    params_type: type[schema.InboundParams]
    handler: Callable[..., Any]
    precedence: Callable[[msgspec.Raw], None] | None = None

    @property
    def ordering(self) -> methods.Ordering:
        return self.spec.ordering
