"""Strings from JSON that are not text: unpaired UTF-16 surrogates.

JSON may carry ``\\ud800`` without its pair; Python decodes it to a lone surrogate, which
no UTF-8 encoder accepts. Tools refuse such arguments (``_args``); everything that shows
arguments to the client shows them escaped. File names that are not UTF-8 reach Python as
lone surrogates too (``surrogateescape``) and are shown with their bytes escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from acp_server.patterns import LazyPattern

LONE_SURROGATE: Final = LazyPattern("[\\ud800-\\udfff]")


def encodable(value: Any) -> Any:
    """``value`` (JSON data) with every unpaired surrogate in its strings shown as a
    ``\\udXXX`` escape, so that it can be sent or shown."""
    if isinstance(value, str):
        if LONE_SURROGATE.search(value) is None:
            return value
        return value.encode("utf-8", errors="backslashreplace").decode("utf-8")
    if isinstance(value, Mapping):
        return {encodable(key): encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(item) for item in value]
    return value


def shown_name(text: str) -> str:
    """A path as text: bytes of a non-UTF-8 name appear as ``\\xNN`` escapes (any other
    lone surrogate as ``\\udXXX``)."""
    if LONE_SURROGATE.search(text) is None:
        return text
    try:
        raw = text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return str(encodable(text))
    return raw.decode("utf-8", errors="backslashreplace")
