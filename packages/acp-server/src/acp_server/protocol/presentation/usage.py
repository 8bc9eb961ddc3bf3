"""A turn's token counts as the ``session/prompt`` result's ``usage`` (ZeroClaw's extension
of the prompt result, acp_core/schema/zeroclaw.py)."""

from __future__ import annotations

from acp_core import schema
from acp_server.model import Usage


def prompt_usage(usage: Usage) -> schema.PromptUsage | None:
    """The prompt result's ``usage``: the turn's token counts; None when the provider
    reported none."""
    if not (usage.total_tokens or usage.reasoning_tokens):
        return None
    return schema.PromptUsage(
        total_tokens=usage.total_tokens,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        thought_tokens=usage.reasoning_tokens or None,
    )
