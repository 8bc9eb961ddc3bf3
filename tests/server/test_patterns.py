"""LazyPattern: a module-level regular expression that compiles on first use."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.providers import echo
from acp_server.agent.tools import arguments
from acp_server.config import mcp
from acp_server.patterns import LazyPattern
from acp_server.security import commands
from acp_server.storage import codec


def test_nothing_is_compiled_until_a_method_needs_it() -> None:
    pattern = LazyPattern(r"(\w+)@(\w+)")
    assert pattern._compiled is None
    assert pattern.sub(r"\2 at \1", "me@home") == "home at me"
    assert pattern._compiled is pattern.compiled


def test_module_patterns_are_lazy_until_used() -> None:
    # Importing a module costs no compilation: the classifier's patterns wait for a command.
    assert isinstance(commands._BRACES, LazyPattern)
    assert isinstance(codec._ESCAPED, LazyPattern)
    # zeroclaw acp imports these before its first prompt: the echo provider, the tool
    # argument checks (the built-in tool table) and the MCP server settings (the config).
    assert isinstance(echo._WORD, LazyPattern)
    assert isinstance(arguments._AT, LazyPattern)
    assert isinstance(arguments._NOUN, LazyPattern)
    assert isinstance(mcp._TOKEN, LazyPattern)


@given(st.text(alphabet="ab{},\x01\n$_x=", max_size=40))
def test_every_method_answers_as_re_does(text: str) -> None:
    for source, flags in ((r"\{([^{}]*,[^{}]*)\}", 0), ("\x01(.)", re.DOTALL), (r"^[a-z_]+=", 0)):
        lazy, eager = LazyPattern(source, flags), re.compile(source, flags)
        for method in ("match", "fullmatch", "search"):
            found, expected = getattr(lazy, method)(text), getattr(eager, method)(text)
            assert (found and found.group(0)) == (expected and expected.group(0))
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
        assert lazy.findall(text) == eager.findall(text)
        assert lazy.sub("<\\g<0>>", text) == eager.sub("<\\g<0>>", text)
