"""What an ACP client does with the frames we send, as far as its ``initialize`` tells.

Most of what the server sends renders the same in every client. Permission requests do
not: ACP gives each option an opaque ``optionId``, a ``name`` and a ``kind``, and clients
read different parts of it. Read from each client's source:

* Zed (``clientInfo.name`` ``zed``; crates/acp_thread) and Toad (``toad``;
  toad/acp/agent.py ``rpc_request_permission``) show every option by its name and send
  back the one the person picked. So does ``zeroclaw prompt`` (``zeroclaw-prompt``), which
  dismisses questions it is told to answer by itself.
* CodeCompanion.nvim (``CodeCompanion.nvim``) labels and binds options by kind,
  never showing their names (lua/codecompanion/interactions/chat/acp/request_permission.lua,
  ``build_choices``); acpx (``acpx``) asks ``y/N`` and answers with the first allow or
  reject option, and its default permission mode approves on its own
  (dist/queue-owner-runtime-*.js, ``resolvePermissionByPolicy``); avante.nvim sends no
  ``clientInfo`` (lua/avante/libs/acp_client.lua, ``initialize``), answers yes / always /
  no by kind (lua/avante/ui/acp_confirm_adapter.lua, ``map_acp_options``) and approves
  every request unseen by default (``behaviour.auto_approve_tool_permissions``). None of
  them can send back one of several choices the person picked: ask_user's choices are
  not asked there (the model asks in its reply instead).
* Any other client gets the choices one per kind (at most one option of each kind), so
  a client that keys options by kind still sends back the one the person picked.

Option ids: the ZeroClaw ACP docs' ``allow-once`` / ``allow-always`` / ``reject-once``
for every client that names itself; a client that does not (avante.nvim) gets the
kind-named ids its inline buttons approve. Answers are accepted in both spellings from
every client (acp_server/protocol/presentation/permissions.py).
"""

from __future__ import annotations

from typing import Final

import msgspec

from acp_core import schema
from acp_server.agent.tools.base import ChoiceQuestions

NAME_RENDERING_CLIENTS: Final = frozenset({"zed", "toad", "zeroclaw-prompt"})
"""``clientInfo.name`` (lowercased) of clients that show each permission option by name."""
KIND_ANSWERING_CLIENTS: Final = frozenset({"codecompanion.nvim", "acpx"})
"""``clientInfo.name`` (lowercased) of clients that answer permission requests by kind."""


class ClientProfile(msgspec.Struct, frozen=True):
    """How to ask one client: ask_user's choices, the approval options' ids, and the
    opt-in extras of the ZeroClaw ACP docs it asked for in ``initialize``."""

    name: str | None = None
    choice_questions: ChoiceQuestions = "names"
    option_ids: schema.OptionIds = "zeroclaw"
    reject_with_edit: bool = False
    cancel_marker_tool_call: bool = False


BEFORE_INITIALIZE: Final = ClientProfile()
"""A connection whose client has not sent ``initialize`` (ACP clients send it first; a
peer that skips it gets the frames exactly as the ZeroClaw ACP docs show them)."""


def client_profile(params: schema.InitializeParams) -> ClientProfile:
    """The profile ``initialize``'s ``clientInfo`` and ``_meta.zeroclaw`` flags give."""
    name = params.client_name
    known = name.strip().lower() if name is not None else None
    choices: ChoiceQuestions
    if known is None or known in KIND_ANSWERING_CLIENTS:
        choices = "unasked"
    elif known in NAME_RENDERING_CLIENTS:
        choices = "names"
    else:
        choices = "one_per_kind"
    return ClientProfile(
        name=name,
        choice_questions=choices,
        option_ids="kinds" if known is None else "zeroclaw",
        reject_with_edit=params.reject_with_edit,
        cancel_marker_tool_call=params.cancel_marker_tool_call,
    )
