"""The gateway's bookkeeping of principals (gateway/principals.py, gateway/auth.py): the
last use of each token is written in batches, at most once per interval, never per request;
a store that fails keeps them for the next try; the registry names tokens."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import cast

import pytest
import trio

from acp_server.gateway.auth import TokenRegistry, hash_token
from acp_server.gateway.principals import TokenUses, flush_token_uses, keep_token_uses
from acp_server.gateway.state import GatewayState
from acp_server.storage import StoreError, imported_principal


class RecordingStore:
    def __init__(self) -> None:
        self.writes: list[dict[str, str]] = []
        self.failing = False

    async def record_token_use(self, last_used: Mapping[str, str]) -> None:
        await trio.lowlevel.checkpoint()
        if self.failing:
            raise StoreError("database is locked")
        self.writes.append(dict(last_used))


def _state(store: RecordingStore) -> GatewayState:
    return cast(
        GatewayState, SimpleNamespace(app=SimpleNamespace(store=store), token_uses=TokenUses())
    )


async def test_uses_are_written_once_per_interval_not_per_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    store = RecordingStore()
    state = _state(store)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_token_uses, state, 60.0)
        for second in range(150):  # an admission a second for two and a half minutes
            state.token_uses.note("alice-digest" if second % 2 else "bob-digest")
            await trio.sleep(1)
        nursery.cancel_scope.cancel()
    # At 60 s, at 120 s, and the last ones when the gateway stops.
    assert len(store.writes) == 3
    assert all(set(write) == {"alice-digest", "bob-digest"} for write in store.writes)
    assert state.token_uses.take_pending() == {}


async def test_a_failed_write_keeps_the_uses_for_the_next_one() -> None:
    store = RecordingStore()
    state = _state(store)
    state.token_uses.note("alice-digest")
    store.failing = True
    await flush_token_uses(state)
    assert store.writes == []
    store.failing = False
    await flush_token_uses(state)
    assert [set(write) for write in store.writes] == [{"alice-digest"}]
    await flush_token_uses(state)  # nothing new: no write
    assert len(store.writes) == 1


@pytest.mark.parametrize("name", [None, "alice"])
def test_the_registry_names_every_token(name: str | None) -> None:
    digest = hash_token("zc_" + "ef" * 32)
    registry = TokenRegistry()
    registry.add(digest, name)
    expected = name or imported_principal(digest)
    assert registry.principal_of(registry.verify("zc_" + "ef" * 32) or "") == expected
    assert registry.has_principal(expected)
    registry.name({digest: "renamed", "unknown": "ignored"})
    assert registry.principals == {digest: "renamed"}
