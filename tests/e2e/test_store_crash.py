"""SIGKILL in the middle of large commits: the store is never torn.

The server-level crash test (tests/e2e/test_store_e2e.py) kills ``zeroclaw acp`` around
its turns, but a commit of a small turn lasts well under a millisecond, so few kills land
inside one. Here a child process does nothing but commit big turns (tens of milliseconds
each), so most kills interrupt a transaction half-way.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acp_server.storage.sqlite import SessionStore

pytestmark = pytest.mark.e2e

MESSAGES_PER_TURN = 300
KILLS = 10

_WRITER = """
import sys
from pathlib import Path
from acp_server.model import ChatMessage, CompletedTurn, ToolCall
from acp_server.storage import DuplicateSession
from acp_server.storage.sqlite import SessionStore

store = SessionStore.open(Path(sys.argv[1]))
try:
    store.create_session("crash", "default", "/w")
except DuplicateSession:
    pass
first = int(sys.argv[2])
per_turn = int(sys.argv[3])
for number in range(first, first + 1_000_000):
    messages = [ChatMessage(role="user", content=f"turn {number}")]
    for i in range((per_turn - 2) // 2):
        call = ToolCall(id=f"{number}-{i}", name="shell", arguments={"command": "x" * 500})
        messages.append(ChatMessage(role="assistant", content="y" * 1000, tool_calls=(call,)))
        messages.append(
            ChatMessage(role="tool", content="z" * 1000, tool_call_id=call.id, tool_name="shell")
        )
    messages.append(ChatMessage(role="assistant", content=f"end of turn {number}"))
    store.append_turn("crash", CompletedTurn(messages=tuple(messages)))
    print(number, flush=True)
"""


def test_sigkill_mid_commit_leaves_whole_turns_only(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "acp-sessions.db"
    rng = random.Random(7)
    reported: list[int] = []
    next_turn = 0
    for _ in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(next_turn), str(MESSAGES_PER_TURN)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        first_line = child.stdout.readline()  # the child is committing: now pick a moment
        assert first_line, "the writer exited before its first commit"
        time.sleep(rng.uniform(0.0, 0.15))  # when to kill is the point here, not a wait
        child.kill()
        child.wait(timeout=30)
        rest = child.stdout.read()  # the same buffered reader: readline may have read ahead
        child.stdout.close()
        numbers = [int(line) for line in (first_line + rest).split()]
        reported.extend(numbers)
        next_turn = numbers[-1] + 1 + 1000  # never reuse a number, committed or not

        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            per_turn = conn.execute(
                "SELECT turn_seq, count(*) FROM acp_messages GROUP BY turn_seq"
            ).fetchall()
        assert all(count == MESSAGES_PER_TURN for _turn, count in per_turn), per_turn
        store = SessionStore.open(path)
        stored = store.load_session("crash", max_messages=None)
        store.close()
        assert stored is not None
        assert stored.info.turn_count == len(per_turn)
        prompts = [int(m.content.split()[1]) for m in stored.messages if m.role == "user"]
        # Every reported commit is there; at most one more (killed after COMMIT, before
        # it could print), and never a piece of one.
        assert prompts[: len(reported)] == reported
        assert len(prompts) - len(reported) in (0, 1)
        if len(prompts) > len(reported):
            reported.append(prompts[-1])
        calls = [c.id for m in stored.messages for c in m.tool_calls]
        results = [m.tool_call_id for m in stored.messages if m.role == "tool"]
        assert calls == results
