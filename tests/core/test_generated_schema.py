"""acp_core/schema/generated.py and generated_leaves.py are exactly what
scripts/gen_acp_schema.py makes from the pinned official ACP schema (tests/acp_schema.py
installs it; without npm this skips, and fails under ``ZEROCLAW_REQUIRE_SCHEMA_TESTS=1``),
and the generated types read what ACP sends that ZeroClaw's hand-written types never knew."""

from __future__ import annotations

import difflib
import json

import pytest

from acp_core import schema
from acp_core.errors import InvalidParamsError
from acp_core.jsonrpc import JsonObject
from scripts.gen_acp_schema import LEAVES_OUTPUT, OUTPUT, generate
from tests.acp_schema import install_schema


def test_generated_types_are_what_the_pinned_schema_gives() -> None:
    regenerated = generate(install_schema())
    assert set(regenerated) == {OUTPUT, LEAVES_OUTPUT}
    for committed, text in regenerated.items():
        fresh = text.splitlines()
        current = committed.read_text(encoding="utf-8").splitlines()
        drift = list(
            difflib.unified_diff(current, fresh, str(committed), "regenerated", lineterm="")
        )
        assert not drift, (
            f"{committed.name} is out of date: run `uv run python scripts/gen_acp_schema.py`\n"
            + "\n".join(drift[:60])
        )


def test_updates_acp_added_are_read_not_refused() -> None:
    notice = {
        "sessionId": "s-1",
        "update": {"sessionUpdate": "notice", "severity": "warning", "title": "Low disk"},
    }
    decoded = schema.decode(schema.SessionNotification, json.dumps(notice))
    assert isinstance(decoded.update, schema.Notice)
    assert decoded.update.title == "Low disk"
    assert json.loads(schema.encode(decoded)) == notice


def test_annotations_and_meta_of_a_prompt_part_survive_the_lenient_reader() -> None:
    part: JsonObject = {
        "type": "text",
        "text": "hi",
        "annotations": {"priority": 0.5},
        "_meta": {"x": 1},
    }
    # session_id (an alias) sends the whole prompt through the lenient reader.
    lenient = schema.decode_params(schema.PromptParams, {"session_id": "s", "prompt": [part]})
    typed = schema.decode_inbound(
        schema.PromptParams, json.dumps({"sessionId": "s", "prompt": [part]}).encode()
    )
    assert lenient == typed
    text = lenient.prompt[0]
    assert isinstance(text, schema.TextContent)
    assert text.annotations == schema.Annotations(priority=0.5)
    assert text.meta == {"x": 1}


def test_an_embedded_resource_without_text_or_blob_is_refused_naming_both() -> None:
    with pytest.raises(InvalidParamsError, match="expected `blob` or `text`"):
        schema.convert(schema.EmbeddedResource, {"type": "resource", "resource": {"uri": "u"}})
