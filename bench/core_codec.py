"""acp-core codec vs the official ACP Python SDK's pydantic models, on one realistic mix.

Run: ``uv run python bench/core_codec.py`` (or ``nox -s bench``). A benchmark, not a test:
it prints figures and exits 0; the target is acp-core ≥ 3× the SDK on the mix.

The mix is one prompt turn as it crosses the wire: one inbound ``session/prompt`` with a
text part and a 1 MiB PDF blob (base64), ``--chunks`` ``agent_message_chunk`` updates,
``--tools`` ``tool_call`` / ``tool_call_update`` pairs (with ZeroClaw's ``name`` /
``body`` extensions and a text content item), and the prompt result.

Both sides do the work their library does for a line on the wire:

* decode + validate: JSON line → typed object. acp-core: ``parse_frame`` (envelope rules,
  params left raw) then ``Frame.decode_payload`` straight into the Struct (strict, outbound
  types), or, for the inbound prompt, ``schema.decode_inbound`` on the raw params: the path
  ``zeroclaw acp`` takes (typed in one pass; the lenient reader only for odd shapes).
  SDK: ``json.loads`` then ``Model.model_validate(params)``, as ``acp`` does.
* encode: typed object → framed line. acp-core: ``encode_notification`` / ``encode_request``
  / ``encode_result`` + ``encode_line``. SDK: ``model_dump(mode="json", by_alias=True,
  exclude_none=True, exclude_defaults=True)`` then ``json.dumps`` + newline, as ``acp`` does.

Blob materialisation (base64 decode + SHA-256 of the 1 MiB) is not schema work and the
SDK does none, so it is timed separately for acp-core only.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import time
from collections.abc import Callable
from typing import Any, Final

import acp.schema as sdk
import msgspec

from acp_core import methods, schema
from acp_core.blobs import plan_prompt
from acp_core.framing import encode_line
from acp_core.jsonrpc import (
    Frame,
    encode_notification,
    encode_request,
    encode_result,
    parse_frame,
)

BLOB_BYTES: Final = 1024 * 1024
SESSION_ID: Final = "3f1c2a9e-7b1d-4c55-9a4e-1f0e2d3c4b5a"
WORDS: Final = [
    "the",
    "commit",
    "refactors",
    "session",
    "handling",
    "so",
    "that",
    "every",
    "prompt",
    "turn",
    "owns",
    "a",
    "cancel",
    "scope",
    "and",
    "the",
    "writer",
    "task",
    "serialises",
    "frames",
    "onto",
    "stdout",
    "without",
    "interleaving",
]


def build_mix(chunks: int, tools: int, rng_seed: int = 7) -> list[bytes]:
    """The wire lines of one prompt turn (client and agent messages interleaved)."""
    rng = random.Random(rng_seed)
    blob = base64.b64encode(rng.randbytes(BLOB_BYTES)).decode()
    lines: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": methods.SESSION_PROMPT,
            "params": {
                "sessionId": SESSION_ID,
                "prompt": [
                    {"type": "text", "text": "Summarise the attached report."},
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "file:///home/dev/report.pdf",
                            "mimeType": "application/pdf",
                            "blob": blob,
                        },
                    },
                ],
            },
        }
    ]
    per_tool = max(1, chunks // max(1, tools))
    for index in range(chunks):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))
        lines.append(_update({"sessionUpdate": "agent_message_chunk", "content": _text(text)}))
        if tools and index % per_tool == 0 and index // per_tool < tools:
            call_id = f"toolu_{index:08d}"
            command = f"git log -{rng.randint(1, 9)} --stat"
            lines.append(
                _update(
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": call_id,
                        "title": "shell",
                        "kind": "execute",
                        "status": "pending",
                        "rawInput": {"command": command, "approved": False},
                        "name": "shell",
                    }
                )
            )
            output = "\n".join(" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(8))
            lines.append(
                _update(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "completed",
                        "rawOutput": output,
                        "name": "shell",
                        "title": "shell",
                        "kind": "execute",
                        "body": output,
                        "content": [{"type": "content", "content": _text(output)}],
                    }
                )
            )
    lines.append(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"sessionId": SESSION_ID, "stopReason": "end_turn", "content": "Done."},
        }
    )
    return [json.dumps(line, separators=(",", ":")).encode() for line in lines]


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _update(update: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": methods.SESSION_UPDATE,
        "params": {"sessionId": SESSION_ID, "update": update},
    }


# ------------------------------------------------------------------ acp-core


def core_decode(lines: list[bytes]) -> list[tuple[Frame, msgspec.Struct]]:
    out: list[tuple[Frame, msgspec.Struct]] = []
    for line in lines:
        frame = parse_frame(line)
        typed: msgspec.Struct
        if frame.kind == "request":
            # Inbound: what acp_server.protocol.connection does with a request's params.
            typed = schema.decode_inbound(schema.PromptParams, frame.payload)
        elif frame.kind == "notification":
            typed = frame.decode_payload(schema.SessionNotification)
        else:
            typed = frame.decode_payload(schema.PromptResult)
        out.append((frame, typed))
    return out


def core_encode(decoded: list[tuple[Frame, msgspec.Struct]]) -> int:
    total = 0
    for frame, typed in decoded:
        if frame.kind == "request":
            data = encode_request(frame.id, frame.method, typed)
        elif frame.kind == "notification":
            data = encode_notification(frame.method, typed)
        else:
            data = encode_result(frame.id, typed)
        total += len(encode_line(data))
    return total


# ------------------------------------------------------------------ official SDK


def sdk_decode(lines: list[bytes]) -> list[tuple[dict[str, Any], Any]]:
    out: list[tuple[dict[str, Any], Any]] = []
    for line in lines:
        message: dict[str, Any] = json.loads(line)
        method = message.get("method")
        typed: Any
        if method == methods.SESSION_PROMPT:
            typed = sdk.PromptRequest.model_validate(message["params"])
        elif method == methods.SESSION_UPDATE:
            typed = sdk.SessionNotification.model_validate(message["params"])
        else:
            typed = sdk.PromptResponse.model_validate(message["result"])
        out.append((message, typed))
    return out


def sdk_encode(decoded: list[tuple[dict[str, Any], Any]]) -> int:
    total = 0
    for message, typed in decoded:
        payload = typed.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude_defaults=True
        )
        envelope: dict[str, Any] = {"jsonrpc": "2.0"}
        if "id" in message:
            envelope["id"] = message["id"]
        if "method" in message:
            envelope["method"] = message["method"]
            envelope["params"] = payload
        else:
            envelope["result"] = payload
        total += len((json.dumps(envelope, separators=(",", ":")) + "\n").encode("utf-8"))
    return total


# ------------------------------------------------------------------ timing


def best_of(repeats: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=2000, help="agent_message_chunk updates")
    parser.add_argument("--tools", type=int, default=100, help="tool_call/tool_call_update pairs")
    parser.add_argument("--repeats", type=int, default=15, help="runs per measurement (best kept)")
    args = parser.parse_args()

    lines = build_mix(args.chunks, args.tools)
    count = len(lines)
    size = sum(len(line) + 1 for line in lines)
    print(f"mix: {count} messages, {size / 1024 / 1024:.2f} MiB on the wire")

    core_decoded = core_decode(lines)
    sdk_decoded = sdk_decode(lines)
    figures: dict[str, tuple[float, float]] = {
        "decode+validate": (
            best_of(args.repeats, lambda: core_decode(lines)),
            best_of(args.repeats, lambda: sdk_decode(lines)),
        ),
        "encode": (
            best_of(args.repeats, lambda: core_encode(core_decoded)),
            best_of(args.repeats, lambda: sdk_encode(sdk_decoded)),
        ),
    }
    figures["mix (both)"] = (
        figures["decode+validate"][0] + figures["encode"][0],
        figures["decode+validate"][1] + figures["encode"][1],
    )
    print(f"{'':18}{'acp-core msg/s':>16}{'SDK msg/s':>14}{'ratio':>8}")
    for name, (core_s, sdk_s) in figures.items():
        print(f"{name:18}{count / core_s:16,.0f}{count / sdk_s:14,.0f}{sdk_s / core_s:7.1f}x")

    prompt = core_decoded[0][1]
    assert isinstance(prompt, schema.PromptParams)
    blob_s = best_of(args.repeats, lambda: plan_prompt(prompt.prompt, uploads_dir="/ws/uploads"))
    print(f"acp-core blob plan (base64 decode + sha256 of 1 MiB): {blob_s * 1000:.2f} ms")


if __name__ == "__main__":
    main()
