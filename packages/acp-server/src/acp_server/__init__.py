"""ZeroClaw ACP server: the stdio server, the WebSocket gateway and the agent runtime behind both."""

# General layout, top to bottom. A module imports only from its own layer or the layers
# below it; `lint-imports` checks this in CI (the "server-layers" contract in
# pyproject.toml; docs/architecture.md, "Layers").
#
# __main__.py (`python -m acp_server`) runs the command line.
#
# cli/ is every `zeroclaw` command: argv, exit codes, the terminal. It starts servers
# through app.py and also runs what is not a server (prompt, sessions, storage migrate).
#
# testing/ sits beside cli/ (neither imports the other): the public test kit, a connection
# served in memory and the doubles that drive it. Nothing in the package imports it.
#
# app.py is the one composition root: it opens the session store, builds the process's
# AcpApp and, over a shared PostgreSQL store, holds the replica leases while it serves.
# Nothing below imports it.
#
# gateway/ is `zeroclaw gateway`'s HTTP front: routes, auth and pairing, the WebSocket
# transport, the client address behind a proxy, drain.
#
# protocol/ is an ACP connection, the same over stdio and WebSocket: the read loop and
# the single writer, the method handlers, the session table and its ownership across
# connections and replicas. protocol/presentation/ renders the agent's domain events
# (and a stored history, on session/load) as ACP messages. protocol/services/context.py
# holds AcpApp, the state every connection of the process shares; protocol/client.py is
# the other end, the JSON-RPC peer a client (`zeroclaw prompt`, the test kit) drives a
# connection with.
#
# agent/ is the turn runtime, in rooms of its own order ("agent-rooms"): runtime/ (a
# session and its turns) > prompt/ (the system prompt and its files) > skills/ > limits/
# (actions and spending) > tools/ > providers/ > io/ (uploads and HTTP pools, shared by
# tools and providers). A turn reports domain events through a port
# (agent/runtime/turn_io.py); it builds no ACP message.
#
# storage/ is the session store: one facade over a subpackage per backend (sqlite/,
# postgres/), which never import each other.
#
# security/ decides: approvals, the path jail, the shell classifier, the pairing rules,
# and the OS sandbox every shell command is started in.
#
# config/ (config.toml as frozen values) and model.py (the conversation: messages, tool
# calls and their records, the plan, a completed turn) sit side by side and import
# neither each other nor anything above.
#
# errors.py (the error tree and the one mapping to JSON-RPC errors), patterns.py and
# procfs.py are the floor: they import nothing of the server.

from __future__ import annotations

__version__ = "0.1.0"
