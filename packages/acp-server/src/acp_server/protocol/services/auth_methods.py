"""ACP ``authMethods``: how a client can help its user set ZeroClaw up.

ZeroClaw has no account to sign in to: a model provider's key comes from the environment
(``zeroclaw init`` writes a starter ``config.toml`` naming it, the key itself never). So
the one method is ACP's ``terminal`` auth: the client runs the agent's own command with
``init`` in place of ``acp`` in a terminal, and a zero exit means done. ACP lets an agent
offer a ``terminal`` method only to a client that can run one (``clientCapabilities.auth
.terminal``, or the older ``_meta["terminal-auth"]``, which the ACP Registry's own check
sends); any other client is offered none, as before.
"""

from __future__ import annotations

from typing import Final

from acp_core.schema.wire import Json

SETUP_METHOD_ID: Final = "zeroclaw-init"
SETUP_ARGS: Final = ("init",)


def auth_methods(*, terminal_auth: bool) -> list[Json]:
    """The ``authMethods`` of the ``initialize`` result for a client that can (or cannot)
    run a terminal method."""
    if not terminal_auth:
        return []
    return [
        {
            "id": SETUP_METHOD_ID,
            "name": "Set up ZeroClaw",
            "description": (
                "Writes a starter ~/.zeroclaw/config.toml choosing a provider from"
                " OPENROUTER_API_KEY, ANTHROPIC_API_KEY or OPENAI_API_KEY (keys are never"
                " written); an offline echo agent works without any key"
            ),
            "type": "terminal",
            "args": list(SETUP_ARGS),
        }
    ]
