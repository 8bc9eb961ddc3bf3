"""AIEOS identity documents: both shapes ZeroClaw's implementation accepts, and broken ones."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.prompt.aieos import AieosError, parse_aieos, render_aieos
from acp_server.agent.prompt.system_prompt import read_aieos
from acp_server.config import AgentConfig, load_config
from acp_server.config.values import IdentityConfig
from tests.helpers import echo_config, write_config

GENERATOR_SHAPE = {
    "@context": "https://aieos.org",
    "identity": {"names": {"first": "Ada", "last": "Quill", "nickname": "Q"}, "bio": "Editor."},
    "psychology": {
        "traits": {"mbti": "INTJ", "ocean": {"openness": 0.8, "neuroticism": 0.125}},
        "neural_matrix": {"creativity": 0.9, "analysis": 0.7},
        "moral_compass": {"alignment": "lawful good", "core_values": ["care", "Care", "truth"]},
    },
    "linguistics": {
        "text_style": {"formality_level": "casual"},
        "idiolect": {"catchphrases": ["ship it"], "forbidden_words": ["synergy"]},
    },
    "motivations": {"goals": {"short_term": [{"title": "fix the build"}]}},
    "interests": {"favorites": {"tea": "oolong", "book": "SICP"}},
}


def test_generator_shape_renders_each_block_with_bold_labels() -> None:
    text = render_aieos(GENERATOR_SHAPE)
    assert text.startswith("## Identity\n\n**Name:** Ada\n**Full Name:** Ada Quill")
    assert "**Nickname:** Q\n**Bio:** Editor." in text
    assert "**MBTI:** INTJ" in text
    assert "**OCEAN:** neuroticism: 0.12, openness: 0.80" in text
    assert "**Neural Matrix:** analysis: 0.70, creativity: 0.90" in text  # sorted by key
    assert "alignment: lawful good" in text
    assert "care, truth" in text  # de-duplicated case-insensitively
    assert '**Catchphrases:** "ship it"' in text
    assert "**Words/Phrases to Avoid:** synergy" in text
    assert "**Short-term Goals:** fix the build" in text
    assert "**Favorites:** book: SICP, tea: oolong" in text
    assert "@context" not in text
    assert "## Capabilities" not in text  # no data, no block


def test_flat_shape_is_accepted_too() -> None:
    text = render_aieos({"identity": {"names": {"full": "Ada"}}, "psychology": {"mbti": "ENFP"}})
    assert "**Full Name:** Ada" in text
    assert "**MBTI:** ENFP" in text


@pytest.mark.parametrize("raw", ["[1, 2]", "{not json", '"text"'])
def test_a_broken_document_is_an_error_naming_the_problem(raw: str) -> None:
    with pytest.raises(AieosError):
        parse_aieos(raw)


@given(
    st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_any_json_object_renders_without_raising(value: object) -> None:
    render_aieos(parse_aieos(json.dumps({"identity": value, "psychology": value})))


def test_broken_aieos_is_a_warning_and_path_wins_over_inline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "me.json").write_text("{broken")
    agent = AgentConfig(
        alias="quill",
        identity=IdentityConfig(
            format="aieos", aieos_path=tmp_path / "me.json", aieos_inline='{"name": "Inline"}'
        ),
    )
    with caplog.at_level(logging.WARNING):
        assert read_aieos(agent) == ""
    [warning] = caplog.records
    assert "quill" in warning.getMessage()
    assert "me.json" in warning.getMessage()
    (tmp_path / "me.json").write_text('{"name": "FromPath"}')
    assert "FromPath" in read_aieos(agent)


def test_identity_keys_resolve_a_relative_path_in_the_agent_workspace(tmp_path: Path) -> None:
    document = echo_config()
    document["agents"]["echo"]["identity"] = {"format": "aieos", "aieos_path": "id.json"}
    config = load_config(write_config(tmp_path, document), environ={})
    identity = config.agents["echo"].identity
    workspace = config.agents["echo"].workspace
    assert workspace is not None
    assert identity.aieos_path == workspace / "id.json"
    assert identity.aieos_configured
