"""The runtime profile's ``max_actions_per_hour`` is stated in the system prompt, under
``### Active Security Policy`` as ZeroClaw's implementation words it, seen through the real
``zeroclaw prompt --show-system-prompt``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import show_system_prompt
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

RATE_LIMIT_LINE = (
    "- **Rate limit**: max {n} actions per hour per chat "
    "(each conversation has its own independent budget)."
)


async def shown_prompt(tmp_path: Path, runtime: dict[str, Any]) -> str:
    config_dir = write_config(tmp_path / "cfg", echo_config(runtime=runtime))
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    with trio.fail_after(60):
        return await show_system_prompt(config_dir, project)


def policy_lines(prompt: str) -> list[str]:
    """The lines of the ``### Active Security Policy`` section."""
    section = prompt.split("### Active Security Policy\n\n", 1)[1].split("\n\n", 1)[0]
    return section.splitlines()


async def test_the_action_budget_is_stated_in_the_security_policy(tmp_path: Path) -> None:
    lines = policy_lines(await shown_prompt(tmp_path, {"max_actions_per_hour": 7}))
    assert RATE_LIMIT_LINE.format(n=7) in lines
    # Where ZeroClaw's implementation puts it: after the command rules, before the sandbox line.
    assert lines.index(RATE_LIMIT_LINE.format(n=7)) == len(lines) - 2
    assert lines[-1].startswith("- **OS sandbox**")


async def test_no_budget_means_no_rate_limit_line(tmp_path: Path) -> None:
    prompt = await shown_prompt(tmp_path, {})
    assert "Rate limit" not in prompt
    assert policy_lines(prompt)[-1].startswith("- **OS sandbox**")
