"""Roots a client names through a real ``zeroclaw acp``: a cwd or an
``additionalDirectories`` entry that would grant ``/``, the server's config or data directory,
its user's home or a forbidden path is refused with -32602 naming it, on ``session/new``,
``session/load`` and ``session/resume``; a stored session that carries one is refused on
restore until the client sends a list that replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from acp_server.storage.sqlite import SessionStore
from tests.e2e.helpers import open_session, spawn_acp
from tests.helpers import JsonDict, echo_config, write_config

pytestmark = pytest.mark.e2e

INVALID_PARAMS: Final = -32602


class Dirs:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path.resolve()
        self.config = write_config(
            self.tmp / "cfg",
            echo_config(risk={"forbidden_paths": ["/var", str(self.tmp / "guarded" / "keys")]}),
        )
        self.data = self.config / "data"
        self.workspace = self.tmp / "ws"
        self.guarded = self.tmp / "guarded"
        for path in (self.data, self.workspace, self.guarded):
            path.mkdir(parents=True, exist_ok=True)


RefusedRoot = tuple[Callable[[Dirs], JsonDict], Callable[[Dirs], str], str]
REFUSED: Final[dict[str, RefusedRoot]] = {
    "cwd /": (lambda d: {"cwd": "/"}, lambda d: "cwd is not allowed (/)", "file system root"),
    "extra /": (
        lambda d: {"cwd": str(d.workspace), "additionalDirectories": ["/"]},
        lambda d: "additionalDirectories[0] is not allowed (/)",
        "it is the file system root",
    ),
    "cwd containing the config dir": (
        lambda d: {"cwd": str(d.tmp)},
        lambda d: f"cwd is not allowed ({d.tmp})",
        "it contains the config directory",
    ),
    "the data dir": (
        lambda d: {"cwd": str(d.workspace), "additionalDirectories": [str(d.data)]},
        lambda d: f"additionalDirectories[0] is not allowed ({d.data})",
        "it contains the data directory",
    ),
    "the home dir": (
        lambda d: {"cwd": str(d.workspace), "additionalDirectories": [str(Path.home())]},
        lambda d: f"is not allowed ({Path.home().resolve()})",
        "it contains the server user's home directory",
    ),
    "a forbidden path": (
        lambda d: {"cwd": str(d.workspace), "additionalDirectories": ["/var"]},
        lambda d: "additionalDirectories[0] is not allowed (/var)",
        "it is a forbidden path (forbidden_paths has /var)",
    ),
    "a root holding a forbidden path": (
        lambda d: {"cwd": str(d.workspace), "additionalDirectories": [".", str(d.guarded)]},
        lambda d: f"additionalDirectories[1] is not allowed ({d.guarded})",
        "it contains a forbidden path",
    ),
}


def assert_refused(response: JsonDict, *fragments: str) -> None:
    assert response.get("error", {}).get("code") == INVALID_PARAMS, response
    message: str = response["error"]["message"]
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("case", REFUSED, ids=str)
async def test_session_new_refuses_a_root_that_would_grant_too_much(
    tmp_path: Path, case: str
) -> None:
    dirs = Dirs(tmp_path)
    params, named, reason = REFUSED[case]
    with trio.fail_after(30):
        async with spawn_acp(dirs.config) as client:
            await client.call("initialize", {"protocolVersion": 1})
            refused = await client.call("session/new", params(dirs))
            served = await client.call("session/new", {"cwd": str(dirs.workspace)})
    assert_refused(refused, named(dirs), reason)
    assert "sessionId" in served["result"]  # the server keeps serving


@pytest.fixture
async def closed_session(tmp_path: Path) -> tuple[Dirs, dict[str, Any]]:
    """A session made and closed by a first ``zeroclaw acp``: the directories, and the
    params that restore it (``sessionId``, ``cwd``)."""
    dirs = Dirs(tmp_path)
    with trio.fail_after(30):
        async with spawn_acp(dirs.config) as client:
            session_id = await open_session(client, dirs.workspace)
            assert "result" in await client.call("session/close", {"sessionId": session_id})
    return dirs, {"sessionId": session_id, "cwd": str(dirs.workspace)}


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_a_restore_refuses_a_root_that_would_grant_too_much(
    closed_session: tuple[Dirs, dict[str, Any]], method: str
) -> None:
    dirs, base = closed_session
    with trio.fail_after(30):
        async with spawn_acp(dirs.config) as client:
            await client.call("initialize", {"protocolVersion": 1})
            refused = await client.call(method, {**base, "additionalDirectories": ["/"]})
            data = await client.call(method, {**base, "additionalDirectories": [str(dirs.data)]})
            restored = await client.call(method, base)
    assert_refused(refused, "additionalDirectories[0] is not allowed (/)")
    assert_refused(data, "it contains the data directory")
    assert "result" in restored, restored


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_a_stored_root_that_would_grant_too_much_is_refused_until_replaced(
    closed_session: tuple[Dirs, dict[str, Any]], method: str
) -> None:
    dirs, base = closed_session
    # Stored by an older server, or another one: "/" among the session's roots.
    store = SessionStore.open(dirs.data / "sessions" / "acp-sessions.db")
    try:
        assert store.set_additional_dirs(base["sessionId"], [str(dirs.workspace), "/"])
    finally:
        store.close()
    with trio.fail_after(30):
        async with spawn_acp(dirs.config) as client:
            await client.call("initialize", {"protocolVersion": 1})
            refused = await client.call(method, base)
            replaced = await client.call(method, {**base, "additionalDirectories": []})
    assert_refused(
        refused,
        f"session {base['sessionId']} cannot be restored with its stored roots",
        "send additionalDirectories to replace them",
        "additionalDirectories[1] is not allowed (/): it is the file system root",
    )
    assert "result" in replaced, replaced
