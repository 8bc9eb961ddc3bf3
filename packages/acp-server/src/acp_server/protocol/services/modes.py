"""ACP ``session/set_mode``: the ``mode`` config option (services/config_options.py) set
through ACP's session modes, for clients that read ``modes`` rather than config options
(acpx's ``set-mode``, avante's legacy mode picker).

A mode id is a risk level the session's profile allows; a higher one is refused as the
config option refuses it (-32602), and the change is announced both ways.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from acp_core import schema
from acp_core.errors import InvalidParamsError
from acp_server.protocol.services import config_options as options

if TYPE_CHECKING:
    from acp_core.jsonrpc import Payload
    from acp_server.protocol.routes import Job
    from acp_server.protocol.services.connection_state import ConnectionState

MAX_SHOWN_MODES: Final = 8


def admit_set_mode(state: ConnectionState, params: schema.SetModeParams, request_key: str) -> Job:
    """Applied in arrival order, as ``session/set_config_option`` is; the job stores the
    choice, sends ``config_option_update`` and ``current_mode_update``, and answers ``{}``."""
    session = state.table.live(params.session_id)
    modes = options.session_modes(state.config, session)
    offered = [mode.id for mode in modes.available_modes]
    if params.mode_id not in offered:
        allowed = ", ".join(offered[:MAX_SHOWN_MODES])
        raise InvalidParamsError(
            f"Invalid mode {options.shown(params.mode_id)}: this session offers {allowed}"
            " (at most its agent's risk profile)"
        )
    options.choose(state.app, session, options.MODE_OPTION, params.mode_id)
    announce = options.store_and_announce(state, session, mode_changed=True)

    async def answer() -> Payload:
        await announce()
        return schema.EmptyResult()

    return answer
