"""One mapping from exceptions to JSON-RPC errors (acp_server/errors.py): what a client
is told, and what only the log says."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from acp_core.errors import ErrorCode, SessionNotFoundError
from acp_server.agent.runtime.turn import TurnFailed
from acp_server.errors import AgentUnavailable, OperationFailed, rpc_error_for
from tests.helpers import make_config, session_dir
from tests.server.protocol.test_server_restore import FakeStore
from tests.server.server_harness import open_server

SECRET = "/home/alice/.zeroclaw/data/sessions/acp-sessions.db: SELECT * FROM messages"


def _ref(message: str) -> str:
    assert message.endswith(")"), message
    return message.rsplit("(ref ", 1)[1][:-1]


def test_rpc_errors_pass_through_with_their_code() -> None:
    error = SessionNotFoundError("s-1")
    assert rpc_error_for(error, method="session/load") is error


def test_client_facing_errors_keep_their_words() -> None:
    turn = rpc_error_for(TurnFailed("OpenAI rejected the API key (401)"), method="session/prompt")
    assert (turn.code, turn.message) == (
        ErrorCode.INTERNAL_ERROR,
        "OpenAI rejected the API key (401)",
    )
    agent = rpc_error_for(AgentUnavailable("no key"), method="session/new")
    assert agent.message == "Failed to create agent: no key"


def test_a_foreign_exception_is_logged_under_the_reference_the_client_gets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="acp_server.errors")
    try:
        raise OSError(SECRET)
    except OSError as exc:
        error = rpc_error_for(exc, method="session/new")
    assert error.code == ErrorCode.INTERNAL_ERROR
    assert error.message.startswith("Internal error: see the server log (ref ")
    assert SECRET not in error.message
    ref = _ref(error.message)
    [record] = [r for r in caplog.records if f"[ref {ref}]" in r.getMessage()]
    assert SECRET in record.getMessage()
    assert record.exc_info is not None  # the traceback is in the log


def test_a_failed_step_names_the_step_and_logs_its_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    try:
        try:
            raise RuntimeError(SECRET)
        except RuntimeError as cause:
            raise OperationFailed("Failed to load session") from cause
    except OperationFailed as exc:
        failure = exc
    error = rpc_error_for(failure, method="session/load")
    assert error.message.startswith("Failed to load session: see the server log (ref ")
    ref = _ref(error.message)
    assert any(
        f"[ref {ref}]" in r.getMessage() and SECRET in r.getMessage() for r in caplog.records
    )
    assert _ref(rpc_error_for(failure, method="session/load").message) != ref  # one per failure


async def test_a_store_that_fails_a_load_tells_the_client_only_where_to_look(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class BrokenStore(FakeStore):
        async def claim_session(self, session_id: str) -> int:
            return 2  # the claim goes through; the read that follows fails

        async def load_session(self, session_id: str, *, max_messages: int | None = None) -> None:
            raise RuntimeError(SECRET)

    async with open_server(make_config(tmp_path), store=BrokenStore()) as client:
        failed = await client.error(
            "session/load", {"sessionId": "s-1", "cwd": str(session_dir(tmp_path))}
        )
        # The connection keeps serving after the failure.
        session_id = await client.new_session(session_dir(tmp_path))
    assert session_id
    assert failed["code"] == -32603
    assert SECRET not in failed["message"]
    ref = _ref(failed["message"])
    assert any(f"[ref {ref}]" in r.getMessage() for r in caplog.records)
