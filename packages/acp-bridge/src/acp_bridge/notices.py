"""What the user reads in the chat while the gateway cannot be reached, and for which prompts.

A prompt the editor sends while the bridge is reconnecting is held, and the editor shows a
spinner. None of the editors shows an agent's stderr (Zed keeps it in a log; CodeCompanion,
avante, acpx and Toad drop it while the agent runs), so the bridge writes the explanation
where every editor looks: an ACP ``agent_message_chunk`` on the held prompt's session,
which renders as the start of the agent's reply. Once the connection is back, a short line
says the prompt goes out now; the agent's own reply follows it.

No I/O: ``HeldPrompts`` returns the lines, the relay writes them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

import msgspec

from acp_bridge.messages import agent_message_line

MAX_ANNOUNCED_PROMPTS: Final = 1000
"""Sessions told about the outage, remembered to say when the connection is back."""
RECONNECTED_TEXT: Final = (
    "zeroclaw-acp-bridge: reconnected to the ZeroClaw gateway; sending this prompt now.\n\n"
)


class Outage(msgspec.Struct):
    """A lost connection the bridge is trying to re-establish."""

    cause: str
    retry_until: float | None = None
    """When the bridge gives up (the relay's clock); None: not decided yet."""
    last_attempt: str = ""
    """Why the latest reconnection attempt failed."""

    def text(self, url: str, now: float) -> str:
        """What is wrong, that the bridge is retrying and for how long, and that the prompt
        is kept."""
        # The attempt's error names the URL too; the notice says it once.
        reason = (self.last_attempt or self.cause).removeprefix(f"failed to connect to {url}: ")
        if self.retry_until is None:
            retrying = "The bridge is reconnecting"
        else:
            left = max(0, round(self.retry_until - now))
            retrying = f"The bridge keeps trying to reconnect for up to {left} s more"
        return (
            f"zeroclaw-acp-bridge: the ZeroClaw gateway at {url} cannot be reached right now "
            f"({reason}). {retrying}; this prompt is kept and will be sent as soon as the "
            "gateway is back.\n\n"
        )


class HeldPrompts:
    """Sessions whose ``session/prompt`` is held, and which of them were told why."""

    __slots__ = ("_announced", "_unannounced")

    def __init__(self) -> None:
        self._unannounced: OrderedDict[str, None] = OrderedDict()
        self._announced: OrderedDict[str, None] = OrderedDict()

    def __bool__(self) -> bool:
        """Some held prompt has not been announced yet."""
        return bool(self._unannounced)

    def held(self, session_id: str) -> None:
        self._unannounced[session_id] = None

    def sent(self, session_id: str) -> None:
        """The prompt left the hold before anyone was told: nothing to say about it."""
        self._unannounced.pop(session_id, None)

    def announce(self, text: str) -> list[bytes]:
        """One ``agent_message_chunk`` with ``text`` per prompt not yet announced."""
        lines = [
            agent_message_line(session_id, text, {"bridge": "reconnecting"})
            for session_id in self._unannounced
        ]
        for session_id in self._unannounced:
            self._announced[session_id] = None
            if len(self._announced) > MAX_ANNOUNCED_PROMPTS:
                self._announced.popitem(last=False)
        self._unannounced.clear()
        return lines

    def reconnected(self) -> list[bytes]:
        """For each session told about the outage: the prompt goes out now."""
        lines = [
            agent_message_line(session_id, RECONNECTED_TEXT, {"bridge": "reconnected"})
            for session_id in self._announced
        ]
        self._announced.clear()
        return lines

    def clear(self) -> None:
        self._unannounced.clear()
        self._announced.clear()
