from __future__ import annotations

import json

from acp_core.connection import (
    NotificationReceived,
    RequestReceived,
    ResponseReceived,
    RpcConnection,
    UnmatchedResponse,
)
from acp_core.errors import SessionNotFoundError
from acp_core.jsonrpc import ErrorResponse, Response
from acp_core.schema import PermissionToolCall, RequestPermissionParams, permission_options


def test_outbound_ids_count_up_per_connection() -> None:
    first, second = RpcConnection(), RpcConnection()
    assert first.send_request("a")[0] == "zc-out-0"
    assert first.send_request("b")[0] == "zc-out-1"
    assert second.send_request("c")[0] == "zc-out-0"
    assert first.pending_requests == {"zc-out-0": "a", "zc-out-1": "b"}


def test_an_id_allocated_for_a_request_sent_elsewhere_shares_the_count_and_the_match() -> None:
    conn = RpcConnection(outbound_id_prefix="client-")
    assert conn.allocate_request_id("initialize") == "client-0"
    assert conn.send_request("session/new")[0] == "client-1"
    event = conn.receive('{"jsonrpc":"2.0","id":"client-0","result":{}}')
    assert isinstance(event, ResponseReceived)
    assert event.method == "initialize"
    assert conn.pending_requests == {"client-1": "session/new"}


def test_response_matches_by_id_text_and_is_consumed() -> None:
    conn = RpcConnection()
    request_id, data = conn.send_request("session/request_permission", {"x": 1})
    assert json.loads(data)["id"] == request_id
    event = conn.receive('{"jsonrpc":"2.0","id":"zc-out-0","result":{"ok":true}}')
    assert event == ResponseReceived(
        request_id="zc-out-0",
        method="session/request_permission",
        response=Response(id="zc-out-0", result={"ok": True}),
    )
    again = conn.receive('{"jsonrpc":"2.0","id":"zc-out-0","result":{}}')
    assert isinstance(again, UnmatchedResponse)


def test_numeric_id_with_same_text_matches() -> None:
    conn = RpcConnection(outbound_id_prefix="")
    conn.send_request("m")
    event = conn.receive('{"jsonrpc":"2.0","id":0,"result":1}')
    assert isinstance(event, ResponseReceived)
    assert event.request_id == "0"


def test_unknown_and_null_ids_are_unmatched_not_errors() -> None:
    conn = RpcConnection()
    assert isinstance(
        conn.receive('{"jsonrpc":"2.0","id":"zc-out-9","result":1}'), UnmatchedResponse
    )
    event = conn.receive('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}')
    assert isinstance(event, UnmatchedResponse)
    assert isinstance(event.response, ErrorResponse)


def test_requests_and_notifications_are_reported() -> None:
    conn = RpcConnection()
    assert isinstance(
        conn.receive('{"jsonrpc":"2.0","id":1,"method":"initialize"}'), RequestReceived
    )
    assert isinstance(
        conn.receive('{"jsonrpc":"2.0","method":"session/cancel"}'), NotificationReceived
    )


def test_forget_request() -> None:
    conn = RpcConnection()
    request_id, _ = conn.send_request("m")
    assert conn.forget_request(request_id)
    assert not conn.forget_request(request_id)
    assert isinstance(
        conn.receive(f'{{"jsonrpc":"2.0","id":"{request_id}","result":1}}'), UnmatchedResponse
    )


def test_send_helpers_accept_structs_and_errors() -> None:
    conn = RpcConnection()
    params = RequestPermissionParams(
        session_id="s",
        options=permission_options(edit=False),
        tool_call=PermissionToolCall(
            tool_call_id="approval-1", title="Approve shell?", kind="execute", status="pending"
        ),
    )
    _, data = conn.send_request("session/request_permission", params)
    assert json.loads(data)["params"]["options"][0] == {
        "optionId": "allow-once",
        "name": "Allow once",
        "kind": "allow_once",
    }
    assert json.loads(conn.send_error(4, SessionNotFoundError("s"))) == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {
            "code": -32000,
            "message": "Session not found: s",
            "data": {"details": "Session not found: s"},
        },
    }
