"""What acp-core emits validates against the official ACP Python SDK's models.

The SDK (``agent-client-protocol``, a dev dependency) stands in for a spec-following client:
every outbound golden fixture whose shape base ACP defines must pass its pydantic model.
ZeroClaw's extensions (``name``/``body`` on tool calls, ``_meta``) are extra fields such
clients ignore. ``reject-with-edit`` is sent with the base kind ``reject_once`` because a strict
client rejects ZeroClaw's ``reject_with_edit`` kind (and with it the whole request).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import acp.schema as sdk
import pytest
from pydantic import BaseModel

GOLDEN = Path(__file__).parent / "golden"

SDK_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("session/update", "notification"): sdk.SessionNotification,
    ("session/request_permission", "request"): sdk.RequestPermissionRequest,
    ("session/request_permission", "result"): sdk.RequestPermissionResponse,
    ("initialize", "result"): sdk.InitializeResponse,
    ("session/new", "result"): sdk.NewSessionResponse,
    ("session/prompt", "result"): sdk.PromptResponse,
    ("session/prompt", "request"): sdk.PromptRequest,
}


def cases() -> list[tuple[str, type[BaseModel], Any]]:
    found = []
    for path in sorted(GOLDEN.glob("*.json")):
        fixture = json.loads(path.read_text(encoding="utf-8"))
        model = SDK_MODELS.get((fixture["method"], fixture["role"]))
        if model is None:
            continue
        message = fixture.get("canonical", fixture["wire"])
        payload = message["result"] if fixture["role"] == "result" else message["params"]
        found.append((path.stem, model, payload))
    return found


CASES = cases()


@pytest.mark.parametrize(("name", "model", "payload"), CASES, ids=[c[0] for c in CASES])
def test_emitted_shapes_validate_with_the_official_sdk(
    name: str, model: type[BaseModel], payload: Any
) -> None:
    model.model_validate(payload)


def test_interop_covers_every_session_update_kind() -> None:
    kinds = {
        payload["update"]["sessionUpdate"]
        for _, model, payload in CASES
        if model is sdk.SessionNotification
    }
    assert kinds == {
        "agent_message_chunk",
        "agent_thought_chunk",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    }
