"""How the agent's work looks to an ACP client: the one projection, live and replayed.

``turn_channel.py`` implements the turn's ``TurnIO`` port (acp_server/agent/runtime/
turn_io.py) for one session; ``turn_events.py`` renders each domain event as a
``session/update`` or a ``session/request_permission``. ``tool_updates.py`` builds the
tool cards and the plan, ``permissions.py`` the approval and choice requests and reads
their answers, ``delivered.py`` embeds a delivered file, ``replay.py`` turns a stored
history into the updates ``session/load`` sends with the same builders, ``commands.py``
the skill commands' ``available_commands_update``, ``usage.py`` the prompt result's
usage, and ``client_calls.py`` the requests the tools send the client (elicitation,
files, terminals).
"""
