"""AIEOS identity documents (``[agents.<alias>.identity] format = "aieos"``) as prompt text.

The reader is lenient, as ZeroClaw's is: the top level must be a JSON
object, and both the flat shape and the "official generator" shape are accepted (e.g.
``psychology.mbti`` or ``psychology.traits.mbti``). Each block (``## Identity``,
``## Personality``, ``## Communication Style``, ``## Motivations``, ``## Capabilities``,
``## Background``, ``## Appearance``, ``## Interests``) appears only when it has data, one
bold ``**Label:**`` line per field. Objects inside lists collapse to their ``name``, else
``title``, else a ``k: v; ...`` summary; keys starting with ``@`` are skipped; lists are
de-duplicated case-insensitively.
"""

from __future__ import annotations

import json
from typing import Any, Final

from acp_server.errors import ZeroclawError


class AieosError(ZeroclawError):
    """The document cannot be used; ``str()`` says why."""


# (heading, ((label, (path, ...), quoted), ...)): the first path with data wins.
_SECTIONS: Final = (
    (
        "Identity",
        (
            ("Name", ("identity.names.first", "identity.name", "name"), False),
            ("Full Name", ("identity.names.full",), False),
            ("Nickname", ("identity.names.nickname",), False),
            ("Bio", ("identity.bio", "bio"), False),
            ("Origin", ("identity.origin",), False),
            ("Residence", ("identity.residence",), False),
        ),
    ),
    (
        "Personality",
        (
            ("MBTI", ("psychology.mbti", "psychology.traits.mbti"), False),
            ("OCEAN", ("psychology.ocean", "psychology.traits.ocean"), False),
            ("Neural Matrix", ("psychology.neural_matrix",), False),
            ("Moral Compass", ("psychology.moral_compass",), False),
        ),
    ),
    (
        "Communication Style",
        (
            ("Style", ("linguistics.style", "linguistics.text_style.style_descriptors"), False),
            (
                "Formality Level",
                ("linguistics.formality", "linguistics.text_style.formality_level"),
                False,
            ),
            (
                "Catchphrases",
                ("linguistics.catchphrases", "linguistics.idiolect.catchphrases"),
                True,
            ),
            (
                "Words/Phrases to Avoid",
                ("linguistics.forbidden_words", "linguistics.idiolect.forbidden_words"),
                False,
            ),
        ),
    ),
    (
        "Motivations",
        (
            ("Core Drive", ("motivations.core_drive",), False),
            (
                "Short-term Goals",
                ("motivations.short_term_goals", "motivations.goals.short_term"),
                False,
            ),
            (
                "Long-term Goals",
                ("motivations.long_term_goals", "motivations.goals.long_term"),
                False,
            ),
            ("Fears", ("motivations.fears",), False),
        ),
    ),
    (
        "Capabilities",
        (
            ("Skills", ("capabilities.skills",), False),
            ("Tools Access", ("capabilities.tools",), False),
        ),
    ),
    (
        "Background",
        (
            ("Origin Story", ("history.origin_story",), False),
            ("Education", ("history.education",), False),
            ("Occupation", ("history.occupation",), False),
        ),
    ),
    (
        "Appearance",
        (
            (
                "Appearance",
                ("physicality.appearance", "physicality.style.aesthetic_archetype"),
                False,
            ),
            (
                "Avatar",
                ("physicality.avatar_description", "physicality.image_prompts.portrait"),
                False,
            ),
        ),
    ),
    (
        "Interests",
        (
            ("Hobbies", ("interests.hobbies",), False),
            ("Favorites", ("interests.favorites",), False),
            ("Lifestyle", ("interests.lifestyle",), False),
        ),
    ),
)


def _lookup(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, int | str):
        return str(value).strip()
    if isinstance(value, dict):
        for key in ("name", "title"):
            if isinstance(value.get(key), str) and value[key].strip():
                return str(value[key]).strip()
        return "; ".join(f"{k}: {_text(v)}" for k, v in value.items() if not k.startswith("@"))
    return ""


def _items(value: list[Any]) -> list[str]:
    seen: dict[str, str] = {}
    for item in value:
        text = _text(item)
        if text:
            seen.setdefault(text.casefold(), text)
    return list(seen.values())


def _text(value: Any, *, quoted: bool = False) -> str:
    """A field's value as one line (empty: no data)."""
    if isinstance(value, list):
        items = _items(value)
        return ", ".join(f'"{item}"' if quoted else item for item in items)
    if isinstance(value, dict) and not any(key in value for key in ("name", "title")):
        pairs = sorted((k, _text(v)) for k, v in value.items() if not k.startswith("@"))
        return ", ".join(f"{k}: {v}" for k, v in pairs if v)
    return _scalar(value)


def parse_aieos(raw: str) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise AieosError(f"not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise AieosError("the top level must be a JSON object")
    return document


def render_aieos(document: dict[str, Any]) -> str:
    """The prompt text of an AIEOS document (empty when it holds nothing usable)."""
    names = _lookup(document, "identity.names")
    if isinstance(names, dict) and not names.get("full"):
        full = " ".join(str(names[k]).strip() for k in ("first", "last") if names.get(k))
        if full:
            document = {**document, "identity": {**document["identity"]}}
            document["identity"]["names"] = {**names, "full": full}
    blocks: list[str] = []
    for heading, fields in _SECTIONS:
        lines = []
        for label, paths, quoted in fields:
            for path in paths:
                text = _text(_lookup(document, path), quoted=quoted)
                if text:
                    lines.append(f"**{label}:** {text}")
                    break
        if lines:
            blocks.append(f"## {heading}\n\n" + "\n".join(lines))
    return "\n\n".join(blocks).strip()
