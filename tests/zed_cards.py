"""Zed's model of a thread's tool cards, kept from the frames an agent sends.

Zed's agent panel keeps one card per ``toolCallId``: a ``tool_call`` creates or replaces it, a ``tool_call_update`` changes
the fields it carries (``content`` and ``locations`` are replaced whole), and a
``session/request_permission`` whose ``toolCall`` names an unknown id creates a card of
its own. Only ``completed`` or ``failed`` close a card; a diff survives only if the
completing update carries it again.

``ToolCards.feed`` takes the agent's messages in order; ``problems_at_turn_end`` says what
an editor user would see wrong once the turn is over: a card still open, an edit that lost
its diff, a relative path. ``assert_turn_rendered`` asserts there is nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

CLOSED: Final = frozenset({"completed", "failed"})


@dataclass
class Card:
    """One tool card: its fields as last upserted and every status it went through."""

    tool_call_id: str
    fields: dict[str, Any] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)
    announced: dict[str, Any] = field(default_factory=dict)
    """The call's ``tool_call`` as sent (later updates, permission requests included,
    change ``fields``: a permission request's ``rawInput`` replaces the call's)."""
    had_diff: bool = False
    from_permission: bool = False

    @property
    def status(self) -> str | None:
        return self.statuses[-1] if self.statuses else None

    @property
    def diffs(self) -> list[dict[str, Any]]:
        return [block for block in self.fields.get("content") or () if block["type"] == "diff"]

    @property
    def texts(self) -> list[str]:
        """The text lines the card shows (its ``content`` text blocks)."""
        return [
            block["content"]["text"]
            for block in self.fields.get("content") or ()
            if block["type"] == "content" and block["content"].get("type") == "text"
        ]

    @property
    def locations(self) -> list[dict[str, Any]]:
        return list(self.fields.get("locations") or ())


@dataclass
class ToolCards:
    """The cards of one session, upserted by ``toolCallId`` as Zed does."""

    session_id: str
    cards: dict[str, Card] = field(default_factory=dict)
    relative_paths: list[str] = field(default_factory=list)
    """Every path sent that is not absolute, as ``<toolCallId>: <where> <path>``."""

    def feed(self, messages: Iterable[Mapping[str, Any]]) -> None:
        for message in messages:
            self.feed_one(message)

    def feed_one(self, message: Mapping[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") or {}
        if params.get("sessionId") != self.session_id:
            return
        if method == "session/update":
            update = params["update"]
            kind = update.get("sessionUpdate")
            if kind == "tool_call":
                self._upsert(update, replace=True)
            elif kind == "tool_call_update":
                self._upsert(update, replace=False)
        elif method == "session/request_permission":
            self._upsert(params["toolCall"], replace=False, from_permission=True)

    def _upsert(
        self, update: Mapping[str, Any], *, replace: bool, from_permission: bool = False
    ) -> None:
        call_id = update["toolCallId"]
        card = self.cards.get(call_id)
        if card is None:
            card = self.cards[call_id] = Card(call_id, from_permission=from_permission)
        elif replace:
            card.fields.clear()
        if replace:
            card.announced = dict(update)
        for key, value in update.items():
            if key != "sessionUpdate":
                card.fields[key] = value
        status = update.get("status")
        if isinstance(status, str) and (not card.statuses or card.statuses[-1] != status):
            card.statuses.append(status)
        if card.diffs:
            card.had_diff = True
        for block in update.get("content") or ():
            if block.get("type") == "diff":
                self._check_absolute(call_id, "diff.path", block.get("path"))
        for place in update.get("locations") or ():
            self._check_absolute(call_id, "locations[].path", place.get("path"))

    def _check_absolute(self, call_id: str, where: str, path: object) -> None:
        if not isinstance(path, str) or not posixpath.isabs(path):
            self.relative_paths.append(f"{call_id}: {where} {path!r}")

    def named(self, name: str) -> list[Card]:
        """The cards of the calls of tool ``name``, in the order they were opened."""
        return [card for card in self.cards.values() if card.fields.get("name") == name]

    def problems_at_turn_end(self) -> list[str]:
        """What is wrong once the turn has ended: open cards, edits without their diff,
        paths that are not absolute, cards without a title."""
        problems = list(self.relative_paths)
        for call_id, card in self.cards.items():
            if card.status not in CLOSED:
                problems.append(f"{call_id}: left {card.status!r} ({card.statuses})")
            if not card.fields.get("title"):
                problems.append(f"{call_id}: no title")
            if card.fields.get("kind") == "edit" and card.status == "completed" and not card.diffs:
                lost = "lost its diff" if card.had_diff else "never showed a diff"
                problems.append(f"{call_id}: a completed edit that {lost}")
        return problems


def assert_turn_rendered(cards: ToolCards) -> None:
    problems = cards.problems_at_turn_end()
    assert not problems, "\n".join(problems)
