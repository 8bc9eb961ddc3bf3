"""Property: whatever a client sends, each request gets exactly one answer with its id,
notifications get none, and the connection keeps serving."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import make_config, session_dir
from tests.server.server_harness import ScriptedProvider, open_server, text_round

METHODS = [
    "initialize",
    "session/new",
    "session/prompt",
    "session/cancel",
    "session/stop",
    "session/close",
    "session/load",
    "session/resume",
    "session/update",
    "session/event",
    "session/set_model",
    "authenticate",
    "$/cancel_request",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
params = st.one_of(
    st.none(),
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "sessionId": st.sampled_from(["known", "unknown", ""]) | json_values,
            "prompt": st.sampled_from(["hi", "", [], [{"text": "x"}], 3]) | json_values,
            "cwd": st.sampled_from([".", "/nonexistent", "known"]) | json_values,
            "agentAlias": st.sampled_from(["echo", "nope", " "]) | json_values,
        },
    ),
)
messages = st.lists(
    st.tuples(st.sampled_from(METHODS), params, st.booleans()),  # (method, params, is_request)
    min_size=1,
    max_size=12,
)


async def exchange(
    script: list[tuple[str, Any, bool]], workspace: Path
) -> tuple[list[int], list[dict[str, Any]]]:
    provider = ScriptedProvider([text_round("ok")])
    ids: list[int] = []
    with trio.fail_after(10):
        cwd = session_dir(workspace)
        async with open_server(make_config(workspace), provider=provider) as client:
            known = await client.new_session(cwd)
            for index, (method, raw, is_request) in enumerate(script, start=1000):
                body = json.loads(
                    json.dumps(raw)
                    .replace('"known"', json.dumps(known))
                    .replace('"."', json.dumps(str(cwd)))
                )
                message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
                if body is not None:
                    message["params"] = body
                if is_request:
                    message["id"] = index
                    ids.append(index)
                await client.send_raw(json.dumps(message))
            # A final request proves the connection still serves, and answers come in order
            # of completion, so wait until every request was answered.
            final = await client.call("initialize", {})
            assert "result" in final
            answered = {
                frame.get("id")
                for frame in client.frames
                if "id" in frame and "method" not in frame
            }
            while not set(ids) <= answered:
                frame = await client.receive()
                if "id" in frame and "method" not in frame:
                    answered.add(frame["id"])
    return ids, client.frames


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_every_request_is_answered_exactly_once(script: list[tuple[str, Any, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ids, frames = trio.run(exchange, script, Path(tmp))
    responses = [frame for frame in frames if "id" in frame and "method" not in frame]
    counted = [
        frame["id"] for frame in responses if isinstance(frame["id"], int) and frame["id"] >= 1000
    ]
    assert sorted(counted) == sorted(ids)
    for frame in responses:
        assert ("result" in frame) != ("error" in frame)
        if "error" in frame:
            assert frame["error"]["code"] in (
                -32600,
                -32601,
                -32602,
                -32603,
                -32000,
                -32001,
                -32002,
            )
            assert (
                frame["error"]["code"] != -32603
                or "Agent turn failed" in frame["error"]["message"]
                or "Failed" in frame["error"]["message"]
            )
