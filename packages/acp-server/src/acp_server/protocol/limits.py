"""Limits on what one peer can make a connection hold or send back.

``ByteBudget`` caps the bytes one connection holds in some queue, with waiting.

A connection holds two kinds of bytes a peer controls: frames queued for its writer (a
client that never reads makes them pile up) and the params of requests being served. Each
is bounded by a ``ByteBudget`` as well as by a count, so a few huge messages cannot grow
memory any more than many small ones can. One item larger than the whole budget is still
let through when nothing else is held, so any message the framing accepts can be served.
"""

from __future__ import annotations

import trio


class ByteBudget:
    """Bytes taken and not yet given back, never above ``limit`` (but see the module doc)."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError("a byte budget needs a positive limit")
        self.limit = limit
        self.held = 0
        self._waiting = 0
        self._freed = trio.Event()

    def _fits(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.limit

    def try_take(self, size: int) -> bool:
        """Take ``size`` bytes now if they fit and nobody is waiting ahead; else False."""
        if self._waiting or not self._fits(size):
            return False
        self.held += size
        return True

    async def take(self, size: int) -> None:
        """Take ``size`` bytes, waiting (cancellably) until enough are given back."""
        if self.try_take(size):
            return
        self._waiting += 1
        try:
            while not self._fits(size):
                await self._freed.wait()
        finally:
            self._waiting -= 1
        self.held += size

    def take_now(self, size: int) -> None:
        """Take ``size`` bytes without waiting, past the limit if need be (a small notice
        that must not be dropped and cannot wait)."""
        self.held += size

    def give_back(self, size: int) -> None:
        self.held -= size
        assert self.held >= 0, "gave back more bytes than were taken"
        if self._waiting:  # the usual case has nobody waiting: no event to wake or replace
            self._freed.set()
            self._freed = trio.Event()


def shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"
