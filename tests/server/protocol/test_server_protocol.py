"""The ACP server over an in-memory transport: methods, error codes, ordering, framing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import trio
from msgspec.structs import replace
from trio.testing import MockClock

from acp_server.agent.providers.base import ProviderError, StreamEnd, TextDelta, ThoughtDelta
from tests.helpers import make_config, rpc_error, session_dir
from tests.server.server_harness import ScriptedProvider, open_server, text_round


async def test_initialize_without_store_reports_no_persistence(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path)) as client:
            result = await client.result("initialize", {"protocolVersion": 0})
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is False
    assert "sessionCapabilities" not in caps
    assert caps["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": True}
    assert result["agentInfo"]["name"] == "zeroclaw-acp"
    assert result["authMethods"] == []
    zeroclaw = dict(result["_meta"]["zeroclaw"])
    sandbox = zeroclaw.pop("sandbox")
    assert zeroclaw == {
        "defaultModel": "echo",
        "maxSessions": 10,
        "sessionTimeoutSecs": 3600,
    }
    assert sandbox["requested"] == "auto"


@pytest.fixture
def real_tmp(tmp_path: Path) -> Path:
    return tmp_path.resolve()


async def test_session_new_returns_uuid4_and_canonical_cwd(real_tmp: Path) -> None:
    tmp_path = real_tmp
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(project)
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path)) as client:
            via_dotdot = await client.result("session/new", {"cwd": str(project / "sub" / "..")})
            via_link = await client.result("session/new", {"workspaceDir": str(link)})
            omitted = await client.result("session/new", {})
    assert uuid.UUID(via_dotdot["sessionId"]).version == 4
    assert via_dotdot["workspaceDir"] == str(project)
    assert via_link["workspaceDir"] == str(project)
    assert omitted["workspaceDir"] == str(session_dir(tmp_path))  # the launch directory


async def test_session_new_rejects_a_cwd_that_is_not_a_directory(tmp_path: Path) -> None:
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path)) as client:
            missing = await client.error("session/new", {"cwd": str(tmp_path / "nope")})
            not_dir = await client.error("session/new", {"cwd": str(afile)})
            wrong_type = await client.error("session/new", {"cwd": 42})
    assert missing["code"] == -32602
    assert "cwd is not a usable directory" in missing["message"]
    assert not_dir["code"] == -32602
    assert "Not a directory" in not_dir["message"]
    assert wrong_type["code"] == -32602


async def test_session_new_alias_rules(tmp_path: Path) -> None:
    agents = {
        "a": {},
        "b": {},
        "off": {"enabled": False},
    }
    config = make_config(tmp_path, agents=agents)
    with trio.fail_after(5):
        async with open_server(config) as client:
            none = await client.error("session/new", {"cwd": str(session_dir(tmp_path))})
            unknown = await client.error("session/new", {"agentAlias": "zzz"})
            disabled = await client.error("session/new", {"agent": "off"})
            ok = await client.call("session/new", {"agent_alias": " b "})
        async with open_server(config, connection_default_agent="a") as client:
            via_connection = await client.call("session/new", {})
    assert none["code"] == -32602
    assert "agentAlias" in none["message"]
    assert unknown == rpc_error(-32602, "Unknown agent `zzz` — no [agents.zzz] entry configured")
    assert disabled == rpc_error(-32602, "Agent `off` is not enabled for dispatch")
    assert "result" in ok
    assert "result" in via_connection


async def test_max_sessions_is_enforced(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path, max_sessions=2)) as client:
            first = await client.new_session(session_dir(tmp_path))
            await client.new_session(session_dir(tmp_path))
            error = await client.error("session/new", {"cwd": str(session_dir(tmp_path))})
            # A closed session frees its slot.
            assert await client.result("session/close", {"sessionId": first}) == {}
            await client.new_session(session_dir(tmp_path))
    assert error == rpc_error(-32001, "Maximum session limit reached (2)")


async def test_prompt_streams_chunks_before_its_result(tmp_path: Path) -> None:
    provider = ScriptedProvider([[ThoughtDelta("hmm"), *text_round("Hello", " world")]])
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.request(
                "session/prompt", {"session_id": session_id, "prompt": [{"text": "hi"}]}
            )
            response = await client.wait_response(request_id)
    assert response["result"] == {
        "sessionId": session_id,
        "stopReason": "end_turn",
        "content": "Hello world",
    }
    kinds = [u["sessionUpdate"] for u in client.updates(session_id)]
    # The first prompt names the session before the turn streams.
    assert kinds == [
        "session_info_update",
        "agent_thought_chunk",
        "agent_message_chunk",
        "agent_message_chunk",
    ]
    # The result is the last frame of the turn: every update came first.
    assert client.frames[-1]["id"] == request_id
    assert provider.requests[0].messages[-1].content == "hi"


async def test_prompt_error_codes_in_zeroclaw_order(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path)) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            missing_id = await client.error("session/prompt", {"prompt": "x"})
            unknown = await client.error("session/prompt", {"sessionId": "nope", "prompt": "x"})
            no_prompt = await client.error("session/prompt", {"sessionId": session_id})
            bad_prompt = await client.error(
                "session/prompt", {"sessionId": session_id, "prompt": 7}
            )
            no_text = await client.error(
                "session/prompt", {"sessionId": session_id, "prompt": [{"type": "mystery"}]}
            )
            blank = await client.error("session/prompt", {"sessionId": session_id, "prompt": "  "})
    assert missing_id == rpc_error(-32602, "Missing required parameter: sessionId")
    assert unknown == rpc_error(-32000, "Session not found: nope")
    expected = "Missing required parameter: prompt (must be string or array of parts)"
    assert no_prompt == rpc_error(-32602, expected)
    assert bad_prompt == rpc_error(-32602, expected)
    assert no_text["code"] == -32602
    assert "at least one text part" in no_text["message"]
    assert blank["code"] == -32603
    assert "blank turn" in blank["message"]


async def test_second_prompt_while_one_runs_is_busy(tmp_path: Path) -> None:
    gate = trio.Event()
    provider = ScriptedProvider([text_round("a", "b")], gate=gate)
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            first = await client.prompt_request(session_id, "one")
            blob = {"type": "resource", "resource": {"uri": "file:///x.txt", "blob": "aGk="}}
            busy = await client.error("session/prompt", {"sessionId": session_id, "prompt": [blob]})
            gate.set()
            done = await client.wait_response(first)
    assert busy == rpc_error(-32002, f"Session already has an active prompt turn: {session_id}")
    assert done["result"]["stopReason"] == "end_turn"
    assert not (session_dir(tmp_path) / "uploads").exists()  # the rejected prompt wrote nothing


async def test_blob_parts_are_written_under_uploads_and_marked(tmp_path: Path) -> None:
    provider = ScriptedProvider([text_round("ok")])
    parts = [
        {"type": "text", "text": "see"},
        {
            "type": "resource",
            "resource": {
                "uri": "file:///r/report.pdf",
                "mimeType": "application/pdf",
                "blob": "JVBERi0=",
            },
        },
        {"type": "resource", "resource": {"uri": "file:///a.rs", "text": "fn main() {}"}},
    ]
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            await client.result("session/prompt", {"sessionId": session_id, "prompt": parts})
            bad = await client.error(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [{"type": "resource", "resource": {"uri": "x", "blob": "!!"}}],
                },
            )
    [stored] = list((session_dir(tmp_path) / "uploads").iterdir())
    assert stored.read_bytes() == b"%PDF-"
    assert stored.name.endswith(".pdf")
    text = provider.requests[0].messages[-1].content
    assert text == f"see\n\n[Document: report.pdf] {stored}\n\nfn main() {{}}"
    assert bad["code"] == -32602
    assert bad["message"].startswith("Invalid base64")


async def test_a_bad_later_part_means_no_blob_is_written(tmp_path: Path) -> None:
    good = {"type": "resource", "resource": {"uri": "file:///a.txt", "blob": "aGVsbG8="}}
    huge = {
        "type": "resource",
        "resource": {"uri": "file:///b.bin", "blob": "A" * (14 * 1024 * 1024)},
    }
    with trio.fail_after(10):
        async with open_server(
            make_config(tmp_path), provider=ScriptedProvider([text_round("x")])
        ) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            error = await client.error(
                "session/prompt", {"sessionId": session_id, "prompt": [good, huge]}
            )
    assert error["code"] == -32602
    assert error["message"].startswith("Embedded resource exceeds 10 MB limit")
    assert not (session_dir(tmp_path) / "uploads").exists()


async def test_symlinked_uploads_dir_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "uploads").symlink_to(outside)
    blob = {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "aGk="}}
    with trio.fail_after(5):
        async with open_server(
            make_config(tmp_path), provider=ScriptedProvider([text_round("x")])
        ) as client:
            session_id = await client.new_session(workspace)
            error = await client.error(
                "session/prompt", {"sessionId": session_id, "prompt": [blob]}
            )
    assert error["code"] == -32602
    assert list(outside.iterdir()) == []


async def test_cancel_mid_stream_returns_partial_text(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    provider = ScriptedProvider([text_round(*(f"w{i} " for i in range(100)))], delay=1.0)
    with trio.fail_after(500):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.prompt_request(session_id, "go")
            while len(client.updates(session_id)) < 4:  # the title, then three chunks
                client.notifications.append(await client.receive())
            await client.notify("session/cancel", {"session_id": session_id})
            response = await client.wait_response(request_id)
            # An idle or unknown session: a no-op, answered {} when sent as a request.
            assert await client.result("session/cancel", {"sessionId": session_id}) == {}
            assert await client.result("session/cancel", {"sessionId": "unknown"}) == {}
    result = response["result"]
    assert result["stopReason"] == "cancelled"
    streamed = "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert streamed.startswith("w0 w1 w2 ")
    assert result["content"] == streamed + "\n\n[turn cancelled via client]"
    # No phantom tool: clients draw any tool_call as a tool (acpx prints it, avante
    # stays on "tool calling"); the result carries the marker text.
    assert [u for u in client.updates(session_id) if u["sessionUpdate"] == "tool_call"] == []


async def test_the_styled_cancel_marker_is_sent_to_a_client_that_asks(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    provider = ScriptedProvider([[StreamEnd()]], delay=10.0)
    with trio.fail_after(50):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            meta = {"zeroclaw": {"cancelMarkerToolCall": True}}
            await client.result("initialize", {"protocolVersion": 1, "_meta": meta})
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.prompt_request(session_id, "go")
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.wait_response(request_id)
    assert response["result"]["content"] == "[turn cancelled via client]"
    marker = client.updates(session_id)[-1]
    assert marker["sessionUpdate"] == "tool_call"
    assert marker["toolCallId"].startswith(f"turn-cancelled-{session_id}-")
    assert marker["kind"] == "think"


async def test_cancel_before_any_text_gives_the_marker_alone(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    provider = ScriptedProvider([[StreamEnd()]], delay=10.0)
    with trio.fail_after(50):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.prompt_request(session_id, "go")
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.wait_response(request_id)
    assert response["result"]["content"] == "[turn cancelled via client]"


async def test_stop_waits_for_the_turn_and_close_cancels_it(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    provider = ScriptedProvider([text_round("a", "b", "c")], delay=1.0)
    with trio.fail_after(50):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            first = await client.new_session(session_dir(tmp_path))
            prompt = await client.prompt_request(first, "go")
            stop = await client.request("session/stop", {"sessionId": first})
            stopped = await client.wait_response(stop)
            prompt_response = await client.wait_response(prompt)
            gone = await client.error("session/prompt", {"sessionId": first, "prompt": "again"})

            second = await client.new_session(session_dir(tmp_path))
            second_prompt = await client.prompt_request(second, "go")
            closed = await client.call("session/close", {"sessionId": second})
            cancelled = await client.wait_response(second_prompt)
            close_again = await client.error("session/close", {"sessionId": second})
            stop_unknown = await client.error("session/stop", {"sessionId": second})
    assert stopped["result"] == {"sessionId": first, "stopped": True}
    assert prompt_response["result"]["stopReason"] == "end_turn"  # stop did not interrupt
    # session/stop answered only after the turn it waited for.
    order = [frame.get("id") for frame in client.frames if "id" in frame]
    assert order.index(prompt) < order.index(stop)
    assert gone["code"] == -32000
    assert closed["result"] == {}
    assert cancelled["result"]["stopReason"] == "cancelled"
    assert close_again["code"] == -32000
    assert stop_unknown["code"] == -32000


async def test_inbound_session_update_and_event(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path)) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            typed = await client.result(
                "session/update", {"sessionId": session_id, "type": "focus"}
            )
            nested = await client.result(
                "session/event", {"sessionId": session_id, "update": {"sessionUpdate": "custom"}}
            )
            unknown = await client.error("session/update", {"sessionId": "nope"})
            await client.notify("session/event", {"sessionId": "nope"})  # never answered
            after = await client.call("initialize", {})
    assert typed == {"sessionId": session_id, "type": "focus", "status": "processed"}
    assert nested["type"] == "custom"
    assert unknown["code"] == -32000
    assert "result" in after
    assert all(frame.get("id") is not None for frame in client.frames if "error" in frame)


async def test_framing_errors_are_answered_and_serving_continues(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path)) as client:
            await client.send_raw("{not json")
            parse_error = await client.receive()
            await client.send_raw("[1, 2]")
            batch = await client.receive()
            await client.send_raw('{"jsonrpc": "1.0", "id": 9, "method": "initialize"}')
            version = await client.receive()
            unknown = await client.error("session/set_model", {})
            await client.notify("no/such/notification")
            await client.send_raw(
                '{"jsonrpc": "2.0", "id": "zc-out-99", "result": {}}'
            )  # stray reply
            still = await client.call("initialize", {})
    assert parse_error["id"] is None
    assert parse_error["error"]["code"] == -32700
    assert batch["error"]["code"] == -32600
    assert version["id"] == 9
    assert version["error"]["code"] == -32600
    assert unknown == rpc_error(-32601, "Method not found: session/set_model")
    assert "result" in still
    # Nothing answered the notification or the stray response.
    assert len([f for f in client.frames if "error" in f]) == 4


async def test_provider_failures_are_internal_errors_and_the_session_survives(
    tmp_path: Path,
) -> None:
    class Failing:
        model = "failing"
        calls = 0

        async def stream(self, request: object):  # type: ignore[no-untyped-def]
            Failing.calls += 1
            if Failing.calls == 1:
                raise ProviderError("upstream said no (HTTP 500)")
            if Failing.calls == 2:
                raise RuntimeError("bug with secret details")
            yield TextDelta("fine")
            yield StreamEnd()

    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=Failing()) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            provider_error = await client.error(
                "session/prompt", {"sessionId": session_id, "prompt": "a"}
            )
            bug = await client.error("session/prompt", {"sessionId": session_id, "prompt": "b"})
            ok = await client.result("session/prompt", {"sessionId": session_id, "prompt": "c"})
    assert provider_error == rpc_error(-32603, "Agent turn failed: upstream said no (HTTP 500)")
    assert bug["code"] == -32603
    assert "secret" not in bug["message"]
    assert ok["content"] == "fine"


async def test_empty_model_output_is_reported(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(
            make_config(tmp_path), provider=ScriptedProvider([[StreamEnd()]])
        ) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            error = await client.error("session/prompt", {"sessionId": session_id, "prompt": "a"})
    assert error == rpc_error(-32603, "The model provider returned an invalid semantic completion.")


async def test_history_is_kept_between_turns(tmp_path: Path) -> None:
    provider = ScriptedProvider([text_round("first"), text_round("second")])
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            await client.result("session/prompt", {"sessionId": session_id, "prompt": "one"})
            await client.result("session/prompt", {"sessionId": session_id, "prompt": "two"})
    roles = [(m.role, m.content) for m in provider.requests[1].messages]
    assert roles == [("user", "one"), ("assistant", "first"), ("user", "two")]


async def test_idle_sessions_are_reaped_in_stdio_mode(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    config = make_config(tmp_path, session_timeout_secs=100)
    with trio.fail_after(1000):
        async with open_server(config, reap_idle_sessions=True) as client:
            idle = await client.new_session(session_dir(tmp_path))
            busy = await client.new_session(session_dir(tmp_path))
            await trio.sleep(60)
            await client.result("session/update", {"sessionId": busy, "type": "ping"})
            await trio.sleep(90)
            gone = await client.error("session/update", {"sessionId": idle, "type": "ping"})
            kept = await client.result("session/update", {"sessionId": busy, "type": "ping"})
    assert gone["code"] == -32000
    assert kept["status"] == "processed"


async def test_eof_cancels_in_flight_turns_and_answers_them(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    provider = ScriptedProvider([text_round(*(["x "] * 50))], delay=1.0)
    with trio.fail_after(100):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.prompt_request(session_id, "go")
            await client.receive()
        # open_server closed the input and waited for the server to finish.
    [answer] = [f for f in client.frames if f.get("id") == request_id]
    assert answer["result"]["stopReason"] == "cancelled"


def test_stdout_frames_have_no_raw_newlines() -> None:
    from acp_core.jsonrpc import Response, serialize_message

    encoded = serialize_message(Response(id=1, result={"content": "a\nb"}))
    assert b"\n" not in encoded
    assert json.loads(encoded)["result"]["content"] == "a\nb"


async def test_cancel_request_for_a_prompt_cancels_its_turn(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    provider = ScriptedProvider([text_round(*(["x "] * 50))], delay=1.0)
    with trio.fail_after(100):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.prompt_request(session_id, "go")
            await client.receive()
            await client.notify("$/cancel_request", {"requestId": request_id})
            response = await client.wait_response(request_id)
    assert response["result"]["stopReason"] == "cancelled"


async def test_sessions_run_turns_concurrently(tmp_path: Path, autojump_clock: MockClock) -> None:
    provider = ScriptedProvider([text_round("a ", "b ", "c ")], delay=1.0)
    with trio.fail_after(100):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            first = await client.new_session(session_dir(tmp_path))
            second = await client.new_session(session_dir(tmp_path))
            start = trio.current_time()
            one = await client.prompt_request(first, "go")
            two = await client.prompt_request(second, "go")
            await client.notify("session/cancel", {"sessionId": first})
            cancelled = await client.wait_response(one)
            finished = await client.wait_response(two)
            elapsed = trio.current_time() - start
    assert cancelled["result"]["stopReason"] == "cancelled"
    assert finished["result"] == {
        "sessionId": second,
        "stopReason": "end_turn",
        "content": "a b c ",
    }
    assert elapsed == 4.0  # 4 events x 1 s: one turn's worth, so they overlapped


async def test_the_idle_session_timeout_is_its_own_setting(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    base = make_config(tmp_path, session_timeout_secs=10)
    config = replace(base, acp=replace(base.acp, idle_session_timeout_secs=500))
    with trio.fail_after(2000):
        async with open_server(config, reap_idle_sessions=True) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            await trio.sleep(400)  # far past session_timeout_secs, within the idle timeout
            kept = await client.result("session/update", {"sessionId": session_id, "type": "a"})
            await trio.sleep(600)
            gone = await client.error("session/update", {"sessionId": session_id, "type": "b"})
    assert kept["status"] == "processed"
    assert gone["code"] == -32000
