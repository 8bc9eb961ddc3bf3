"""The agent runtime through the server: approvals, denials, tool updates, cancel mid-tool."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec.structs import replace
from trio.testing import MockClock

from acp_server.agent.tools.base import DeliveredFile, ToolContext, ToolOutput
from acp_server.model import PlanStep
from tests.helpers import make_config, session_dir
from tests.server.server_harness import (
    ScriptedProvider,
    StubTool,
    answer,
    open_server,
    text_round,
    tool_round,
)

RUNTIME_DENIAL = (
    "Tool call not executed: 'stub' requires approval and no operator decision was available, "
    "so the runtime denied it by policy. This was not a user's decision."
)


def stub_turn(arguments: dict[str, Any] | None = None, name: str = "stub") -> ScriptedProvider:
    return ScriptedProvider([tool_round(name, arguments or {"x": 1}), text_round("done")])


def tool_result(provider: ScriptedProvider) -> str:
    """What the model was told the tool returned."""
    return provider.requests[-1].messages[-1].content


async def run_prompt(tmp_path: Path, client: Any, text: str = "go") -> tuple[str, dict[str, Any]]:
    session_id = await client.new_session(session_dir(tmp_path))
    result = await client.result("session/prompt", {"sessionId": session_id, "prompt": text})
    return session_id, result


async def test_allow_once_runs_the_tool_and_pairs_the_updates(tmp_path: Path) -> None:
    tool = StubTool()
    provider = stub_turn()
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, tools=[tool]) as client:
            client.on_request = answer("allow-once")
            session_id, result = await run_prompt(tmp_path, client)
    [request] = client.server_requests
    assert request["id"] == "zc-out-0"
    assert request["method"] == "session/request_permission"
    params = request["params"]
    assert params["sessionId"] == session_id
    assert [o["optionId"] for o in params["options"]] == [
        "allow-once",
        "allow-always",
        "reject-once",
    ]
    # The card's own title (a tool without a definition: its name), so approving does
    # not rename the card.
    assert params["toolCall"]["title"] == "stub"
    # One card per call: the prompt carries the call's own id, announced first.
    assert params["toolCall"]["toolCallId"] == "call-1"
    assert params["toolCall"]["rawInput"] == {"tool": "stub", "summary": "x: 1"}
    assert params["toolCall"]["content"][0]["content"]["text"] == "x: 1"
    assert tool.calls == [{"x": 1}]
    start, running, finish, *_ = [
        u for u in client.updates(session_id) if u["sessionUpdate"].startswith("tool_call")
    ]
    assert running == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "in_progress",
    }
    assert start == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-1",
        "title": "stub",
        "kind": "other",
        "status": "pending",
        "rawInput": {"x": 1},
        "name": "stub",
    }
    assert finish["toolCallId"] == "call-1"
    assert finish["status"] == "completed"
    assert finish["rawOutput"] == finish["body"] == "stub output"
    assert finish["content"] == [
        {"type": "content", "content": {"type": "text", "text": "stub output"}}
    ]
    assert result["content"] == "done"
    assert tool_result(provider) == "stub output"


async def test_rejections_dismissals_and_errors_deny_the_call(tmp_path: Path) -> None:
    outcomes: dict[str, Any] = {
        "reject": answer("reject-once"),
        "dismiss": answer(None),
        "unknown-option": answer("maybe"),
    }
    texts = {}
    for label, handler in outcomes.items():
        tool = StubTool()
        provider = stub_turn()
        with trio.fail_after(5):
            async with open_server(
                make_config(tmp_path), provider=provider, tools=[tool]
            ) as client:
                client.on_request = handler
                await run_prompt(tmp_path, client)
        assert tool.calls == [], label
        texts[label] = tool_result(provider)
    assert texts == {
        "reject": "Denied by user.",
        "dismiss": RUNTIME_DENIAL,
        "unknown-option": RUNTIME_DENIAL,
    }


async def test_an_error_reply_denies_the_call(tmp_path: Path) -> None:
    tool = StubTool()
    provider = stub_turn()

    async def refuse(request: dict[str, Any]) -> None:
        error = {"code": -32601, "message": "no"}
        await client.send_raw(json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}))

    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, tools=[tool]) as client:
            client.on_request = refuse
            await run_prompt(tmp_path, client)
    assert tool.calls == []
    assert tool_result(provider) == RUNTIME_DENIAL


@pytest.mark.parametrize(
    ("session_timeout", "permission_timeout", "denied_after"),
    [
        (30, None, 30),
        # [acp] permission_timeout_secs bounds the wait, whatever session_timeout_secs says.
        (3600, 12, 12),
    ],
)
async def test_no_answer_within_the_permission_timeout_denies(
    tmp_path: Path,
    autojump_clock: MockClock,
    session_timeout: int,
    permission_timeout: int | None,
    denied_after: int,
) -> None:
    tool = StubTool()
    provider = stub_turn()
    base = make_config(tmp_path, session_timeout_secs=session_timeout)
    config = replace(base, acp=replace(base.acp, permission_timeout_secs=permission_timeout))

    async def ignore(request: dict[str, Any]) -> None:
        return None

    with trio.fail_after(10_000):
        async with open_server(config, provider=provider, tools=[tool]) as client:
            client.on_request = ignore
            start = trio.current_time()
            await run_prompt(tmp_path, client)
            waited = trio.current_time() - start
    assert tool.calls == []
    assert tool_result(provider) == RUNTIME_DENIAL
    assert denied_after <= waited < denied_after + 1
    # The client is told it may drop the unanswered question.
    [request] = client.server_requests
    notices = [n for n in client.notifications if n["method"] == "$/cancel_request"]
    assert notices == [
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request["id"]}}
    ]


async def test_allow_always_is_remembered_for_the_session(tmp_path: Path) -> None:
    tool = StubTool()
    provider = ScriptedProvider(
        [tool_round("stub", {}, "c1"), tool_round("stub", {}, "c2"), text_round("done")]
    )
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, tools=[tool]) as client:
            client.on_request = answer("allow-always")
            await run_prompt(tmp_path, client)
    assert len(tool.calls) == 2
    assert len(client.server_requests) == 1


async def test_risk_levels(tmp_path: Path) -> None:
    results = {}
    for level in ("readonly", "full"):
        tool = StubTool()
        provider = stub_turn()
        with trio.fail_after(5):
            async with open_server(
                make_config(tmp_path, level=level), provider=provider, tools=[tool]
            ) as client:
                await run_prompt(tmp_path, client)
        results[level] = (len(tool.calls), len(client.server_requests), tool_result(provider))
    assert results["full"] == (1, 0, "stub output")
    calls, asked, text = results["readonly"]
    assert (calls, asked) == (0, 0)
    assert "read-only" in text


async def test_file_edit_approval_offers_reject_with_edit_to_a_client_that_asks(
    tmp_path: Path,
) -> None:
    tool = StubTool(name="file_edit")
    (session_dir(tmp_path) / "a.txt").write_text("first\nold\n")
    path = str((session_dir(tmp_path) / "a.txt").resolve())
    arguments = {"path": "a.txt", "old_string": "old", "new_string": "new"}
    provider = stub_turn(arguments, name="file_edit")

    async def edit(request: dict[str, Any]) -> dict[str, Any]:
        return {
            "outcome": {
                "outcome": "selected",
                "optionId": "reject-with-edit",
                "replacementContent": "use X",
            }
        }

    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, tools=[tool]) as client:
            client.on_request = edit
            meta = {"zeroclaw": {"rejectWithEdit": True}}
            info = {"name": "test-client", "version": "1"}
            await client.result(
                "initialize", {"protocolVersion": 1, "clientInfo": info, "_meta": meta}
            )
            session_id, _ = await run_prompt(tmp_path, client)
    [request] = client.server_requests
    tool_call = request["params"]["toolCall"]
    assert [o["optionId"] for o in request["params"]["options"]] == [
        "allow-once",
        "allow-always",
        "reject-with-edit",
        "reject-once",
    ]
    assert tool_call["kind"] == "edit"
    assert tool_call["rawInput"] == {
        "tool": "file_edit",
        "summary": "path: a.txt, old_string: old, new_string: new",
    }
    # The whole (small) file before and after, under its absolute path, at the changed line.
    assert tool_call["content"] == [
        {"type": "diff", "path": path, "oldText": "first\nold\n", "newText": "first\nnew\n"}
    ]
    assert tool_call["locations"] == [{"path": path, "line": 2}]
    assert tool_call["_meta"] == {"zeroclaw": {"proposedEdit": "new"}}
    assert tool.calls == []
    assert tool_result(provider) == "use X"
    start = next(u for u in client.updates(session_id) if u["sessionUpdate"] == "tool_call")
    assert start["kind"] == "edit"
    assert start["rawInput"] == arguments
    assert start["content"] == tool_call["content"]


async def test_unknown_tools_and_the_iteration_bound(tmp_path: Path) -> None:
    provider = ScriptedProvider([tool_round("nope", {})])  # asks for a tool forever
    with trio.fail_after(5):
        async with open_server(
            make_config(tmp_path, runtime={"max_tool_iterations": 3}), provider=provider
        ) as client:
            session_id, result = await run_prompt(tmp_path, client)
            provider.rounds.append(text_round("ok"))
            await client.result("session/prompt", {"sessionId": session_id, "prompt": "next"})
    # The note the client saw ends the stored turn (session/load replays it; the model
    # learns why its calls did not run).
    [note] = [
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
        and "max_tool_iterations" in u["content"]["text"]
    ]
    history = provider.requests[-1].messages
    assert (history[-2].role, history[-2].content) == ("assistant", note)
    del provider.requests[-1]
    assert len(provider.requests) == 4  # 3 tool rounds, then the bound stops the turn
    assert provider.requests[1].messages[-1].content.startswith("Error: Unknown tool: nope")
    assert "max_tool_iterations (3)" in result["content"]
    finishes = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    assert len(finishes) == 4  # the last round's call is reported as not executed
    assert finishes[-1]["rawOutput"].startswith("Tool call not executed")


async def test_cancel_mid_tool_cancels_the_tool(tmp_path: Path) -> None:
    tool = StubTool(block=trio.Event())
    provider = stub_turn()
    with trio.fail_after(5):
        async with open_server(
            make_config(tmp_path, level="full"), provider=provider, tools=[tool]
        ) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.prompt_request(session_id, "go")
            await tool.started.wait()
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.wait_response(request_id)
            again = await client.result(
                "session/prompt", {"sessionId": session_id, "prompt": "again"}
            )
    assert tool.cancelled
    assert response["result"]["stopReason"] == "cancelled"
    assert again["stopReason"] == "end_turn"
    # The cancelled turn left nothing in the history the next turn sees.
    assert [m.content for m in provider.requests[-1].messages if m.role == "user"] == ["again"]


async def test_tool_callbacks_ask_user_escalate_and_plan(tmp_path: Path) -> None:
    picked: list[int | None] = []

    async def interactive(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        picked.append(await ctx.ask_choice("Which colour?", ["red", "blue"]))
        await ctx.send_text("Escalated to a human.")
        await ctx.set_plan([PlanStep("step one", "in_progress", "high")])
        return ToolOutput("ok")

    tool = StubTool(name="todo_write", side_effects=False, action=interactive)
    provider = stub_turn(name="todo_write")
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, tools=[tool]) as client:
            client.on_request = answer("choice-1")
            session_id, result = await run_prompt(tmp_path, client)
    assert picked == [1]
    [question] = client.server_requests
    # The question is asked on the asking call's own card, under its title, which its
    # update then closes; the card shows the question and the numbered choices.
    start = next(u for u in client.updates(session_id) if u["sessionUpdate"] == "tool_call")
    assert question["params"]["toolCall"]["title"] == start["title"]
    assert question["params"]["toolCall"]["toolCallId"] == "call-1"
    [content] = question["params"]["toolCall"]["content"]
    assert content["content"]["text"] == "Which colour?\n\n1. red\n2. blue"
    assert [o["kind"] for o in question["params"]["options"]] == ["allow_once", "reject_once"]
    updates = client.updates(session_id)
    assert {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Escalated to a human."},
    } in updates
    assert {
        "sessionUpdate": "plan",
        "entries": [{"content": "step one", "status": "in_progress", "priority": "high"}],
    } in updates
    assert result["content"].startswith("Escalated to a human.")


async def test_delivered_files_are_embedded_only_if_unchanged(tmp_path: Path) -> None:
    uploads = session_dir(tmp_path) / "uploads"
    uploads.mkdir()
    data = b"%PDF-1.7 report"
    digest = hashlib.sha256(data).hexdigest()
    stored = uploads / f"{digest}.pdf"
    stored.write_bytes(data)

    def delivered(sha: str) -> DeliveredFile:
        return DeliveredFile(
            uri=f"attachment://deliver/{sha}.pdf",
            path=stored,
            filename="report.pdf",
            title="Quarterly report",
            mime_type="application/pdf",
            size=len(data),
            sha256=sha,
        )

    outputs = [delivered(digest), delivered("0" * 64)]

    async def deliver(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("Delivered report.pdf", delivered=outputs.pop(0))

    tool = StubTool(name="deliver_file", action=deliver)
    provider = ScriptedProvider(
        [
            tool_round("deliver_file", {}, "d1"),
            tool_round("deliver_file", {}, "d2"),
            text_round("ok"),
        ]
    )
    with trio.fail_after(5):
        async with open_server(
            make_config(tmp_path, level="full"), provider=provider, tools=[tool]
        ) as client:
            session_id, _ = await run_prompt(tmp_path, client)
    good, swapped = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    assert good["status"] == "completed"
    assert good["title"] == "Quarterly report"
    resource = good["content"][1]["content"]["resource"]
    assert resource["uri"] == f"attachment://deliver/{digest}.pdf"
    assert resource["mimeType"] == "application/pdf"
    assert "blob" not in good["rawOutput"]
    assert swapped["status"] == "failed"
    assert len(swapped["content"]) == 1


async def test_calls_without_a_provider_id_get_one_stable_id(tmp_path: Path) -> None:
    tool = StubTool()
    provider = ScriptedProvider([tool_round("stub", {}, call_id=""), text_round("done")])
    with trio.fail_after(5):
        async with open_server(
            make_config(tmp_path, level="full"), provider=provider, tools=[tool]
        ) as client:
            session_id, _ = await run_prompt(tmp_path, client)
    start, running, finish = [
        u for u in client.updates(session_id) if u["sessionUpdate"].startswith("tool_call")
    ]
    assert start["toolCallId"] == running["toolCallId"] == finish["toolCallId"]
    assert len(start["toolCallId"]) == 36
    history = provider.requests[-1].messages
    assert history[-2].tool_calls[0].id == start["toolCallId"]
    assert history[-1].tool_call_id == start["toolCallId"]


def test_chained_messages_behave_like_one_list() -> None:
    from acp_server.model import ChainedMessages, ChatMessage

    head = [ChatMessage("user", "a"), ChatMessage("assistant", "b")]
    tail = [ChatMessage("user", "c")]
    chained = ChainedMessages(head, tail)
    joined = head + tail
    assert len(chained) == 3
    assert list(chained) == joined
    assert list(reversed(chained)) == joined[::-1]
    assert [chained[i] for i in range(-3, 3)] == joined[-3:] + joined
    assert chained[1:] == joined[1:]
    assert chained.index(tail[0]) == 2
    head.append(ChatMessage("user", "later"))  # the history grows after the request
    tail.append(ChatMessage("tool", "later"))
    assert list(chained) == joined
