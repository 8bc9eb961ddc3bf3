"""The dispatch table: every inbound method of ``acp_core.methods.METHODS`` paired with the
service (protocol/services/) that does it, in the shape its ``ordering`` gives (``Route``,
protocol/routes.py).

The router only names; it does nothing itself. Each service is a function of the
connection's ``ConnectionState`` (services/connection_state.py) and the call's params, so
the table is built per connection by binding that state. The connection
(protocol/connection.py) decodes each call's params once and runs the route; failures
become JSON-RPC errors in one place (acp_server/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec

from acp_core import methods, schema
from acp_core.methods import METHODS
from acp_server.protocol.routes import Route
from acp_server.protocol.services import config_options, handshake, lifecycle, prompt
from acp_server.protocol.services.connection_state import ConnectionState
from acp_server.protocol.services.fork import fork_session
from acp_server.protocol.services.modes import admit_set_mode

Handler = Callable[..., Any]
Precedence = Callable[[msgspec.Raw], None]


async def _list_sessions(state: ConnectionState, params: schema.ListSessionsParams) -> Any:
    # Imported by the first session/list: `zeroclaw acp` answers initialize and
    # session/new without it (tests/e2e/test_startup_imports.py).
    from acp_server.protocol.services.listing import list_sessions

    return await list_sessions(state, params)


def build_routes(state: ConnectionState) -> dict[str, Route]:
    """The dispatch table of one connection: every inbound method of ``METHODS``, nothing
    else."""
    bound: dict[str, tuple[Handler, Precedence | None]] = {
        methods.INITIALIZE: (partial(handshake.initialize, state), None),
        methods.SESSION_NEW: (partial(lifecycle.new_session, state), None),
        methods.SESSION_PROMPT: (
            partial(prompt.admit_prompt, state),
            partial(prompt.prompt_precedence, state),
        ),
        methods.SESSION_CANCEL: (partial(prompt.cancel, state), None),
        methods.SESSION_STOP: (partial(lifecycle.admit_stop, state), None),
        methods.SESSION_LOAD: (partial(lifecycle.admit_restore, state, replay=True), None),
        methods.SESSION_RESUME: (partial(lifecycle.admit_restore, state, replay=False), None),
        methods.SESSION_CLOSE: (partial(lifecycle.admit_close, state), None),
        methods.SESSION_LIST: (partial(_list_sessions, state), None),
        methods.SESSION_DELETE: (partial(lifecycle.admit_delete, state), None),
        methods.SESSION_SET_CONFIG_OPTION: (partial(config_options.admit_choice, state), None),
        methods.SESSION_SET_MODE: (partial(admit_set_mode, state), None),
        methods.SESSION_FORK: (partial(fork_session, state), None),
        methods.SESSION_UPDATE: (partial(lifecycle.inbound_update, state), None),
        methods.SESSION_EVENT: (partial(lifecycle.inbound_update, state), None),
        methods.CANCEL_REQUEST: (partial(prompt.cancel_request, state), None),
    }
    routes: dict[str, Route] = {}
    for name, spec in METHODS.items():
        if spec.inbound_params is None:
            continue
        handler, precedence = bound.pop(name)
        routes[name] = Route(spec, spec.inbound_params, handler, precedence)
    assert not bound, f"handlers for methods METHODS does not list: {sorted(bound)}"
    return routes
