"""The part every client model shares: one session's messages, in order, to its
``on_update`` (each ``session/update``) and ``on_permission`` (each
``session/request_permission``). tests/codecompanion_chat.py, tests/avante_chat.py and
tests/acpx_output.py model what each client does with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class SessionModel:
    session_id: str

    def feed(self, messages: Iterable[Mapping[str, Any]]) -> None:
        for message in messages:
            self.feed_one(message)

    def feed_one(self, message: Mapping[str, Any]) -> None:
        params = message.get("params") or {}
        if params.get("sessionId") != self.session_id:
            return
        if message.get("method") == "session/update":
            self.on_update(params["update"])
        elif message.get("method") == "session/request_permission":
            self.on_permission(params)

    def on_update(self, update: Mapping[str, Any]) -> None:
        """One ``session/update``'s ``update``."""

    def on_permission(self, params: Mapping[str, Any]) -> None:
        """One ``session/request_permission``'s params."""
