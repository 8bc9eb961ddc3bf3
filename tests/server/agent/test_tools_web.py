"""web_fetch and http_request: the address checks, the HTML reduction, the limits, against
a local server (tests/e2e/fake_llm.py serves any scripted reply) on 127.0.0.1."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.tools import web, web_guard
from acp_server.agent.tools._html import html_to_markdown
from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.web import (
    DEFAULT_WEB_FETCH_MAX_BYTES,
    HttpRequestTool,
    WebFetchTool,
)
from acp_server.agent.tools.web_guard import (
    WebTarget,
    address_problem,
    embedded_ipv4,
    parse_web_url,
    resolve_target,
)
from acp_server.config import RiskProfileConfig
from acp_server.config.values import WebConfig
from acp_server.security import Approval, SecurityPolicy
from tests.e2e.fake_llm import Reply, serve_fake_llm
from tests.helpers import poll_until
from tests.server.tool_context import make_context

pytestmark = pytest.mark.e2e  # binds 127.0.0.1

OPEN = WebConfig(allow_private_hosts=True)


def page(body: str, *, status: int = 200, content_type: str = "text/html; charset=utf-8") -> Reply:
    return Reply(status=status, chunks=(body.encode(),), content_type=content_type)


def test_html_becomes_markdown() -> None:
    markup = (
        "<html><head><title>Docs</title><style>p{}</style></head><body><h1>A &amp; B</h1>"
        "<p>one\n  two</p><ul><li>x</li><li>y</li></ul><script>secret()</script>"
        "<pre>keep\n  this</pre></body></html>"
    )
    assert (
        html_to_markdown(markup)
        == "Docs\n\n# A & B\n\none two\n\n- x\n- y\n\n```\nkeep\n  this\n```"
    )


@given(st.text(alphabet=st.sampled_from(list("<>/ab =\"'&;#x1\n")), max_size=200))
def test_any_markup_reduces_without_error(markup: str) -> None:
    text = html_to_markdown(f"<script>{markup}</script>{markup}")
    assert "\x00" not in text
    assert text == text.strip()


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "192.168.0.1", "172.16.5.5", "169.254.169.254", "::1",
     "fe80::1", "fc00::1", "::ffff:127.0.0.1", "0.0.0.0", "100.64.0.1", "224.0.0.1"],
)  # fmt: skip
def test_private_and_local_addresses_are_refused(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700::6810:84e5", "8.8.8.8"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


@given(st.integers(0, 2**32 - 1))
def test_ipv4_verdict_matches_is_global(value: int) -> None:
    # Multicast is refused although Python counts parts of 224/4 as global: a request
    # tool has no business sending to a group address.
    address = ipaddress.IPv4Address(value)
    mapped = ipaddress.IPv6Address(f"::ffff:{address}")
    allowed = address.is_global and not address.is_multicast
    assert (address_problem(address) is None) == allowed
    assert (address_problem(mapped) is None) == allowed


EMBEDDINGS = {
    "IPv4-mapped": lambda v4: f"::ffff:{v4}",
    "IPv4-translated": lambda v4: f"::ffff:0:{v4}",
    "IPv4-compatible": lambda v4: f"::{v4}",
    "NAT64": lambda v4: f"64:ff9b::{v4}",
    "6to4": lambda v4: str(ipaddress.IPv6Address((0x2002 << 112) | (int(v4) << 80) | 1)),
}


@pytest.mark.parametrize("embedding", list(EMBEDDINGS))
@given(v4=st.ip_addresses(v=4))
def test_an_ipv6_address_carrying_an_ipv4_one_is_judged_as_that_address(
    embedding: str, v4: ipaddress.IPv4Address
) -> None:
    carrier = ipaddress.IPv6Address(EMBEDDINGS[embedding](v4))
    if embedding == "IPv4-compatible" and int(v4) <= 1:
        return  # :: and ::1 are themselves
    assert embedded_ipv4(carrier) == v4
    problem = address_problem(carrier)
    assert (problem is None) == (address_problem(v4) is None)
    if problem is not None:
        assert f"({v4})" in problem


@given(low=st.integers(0, 2**80 - 1))
def test_local_use_nat64_and_teredo_are_refused_whatever_they_carry(low: int) -> None:
    local_nat64 = ipaddress.IPv6Address((0x0064_FF9B_0001 << 80) | low)
    teredo = ipaddress.IPv6Address((0x2001_0000 << 96) | (low & (2**96 - 1)))
    assert address_problem(local_nat64) == "a local-use NAT64 address (RFC 8215)"
    assert address_problem(teredo) == "a Teredo address (RFC 4380)"


async def test_every_redirect_hop_is_checked_for_a_carried_ipv4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first hop (the local test server) is let through; the redirect to a NAT64
    address of 127.0.0.1 is refused before any connection to it (http_request follows no
    redirect: it shows the 302)."""
    hops: list[str] = []
    real_exchange = web._exchange

    async def first_hop_allowed(url: Any, *, allow_private: bool) -> Any:
        hops.append(str(url))
        return await resolve_target(url, allow_private=len(hops) == 1)

    async def only_the_first_hop(target: WebTarget, *args: Any) -> Any:
        # Never a real connection to the carried address, even should the check regress.
        assert len(hops) == 1, f"connected to {target.connect_url}"
        return await real_exchange(target, *args)

    # web.py imports the check on the tool's first call (start-up stays light): patch it
    # where it lives.
    monkeypatch.setattr(web_guard, "resolve_target", first_hop_allowed)
    monkeypatch.setattr(web, "_exchange", only_the_first_hop)
    async with serve_fake_llm() as server:
        server.add(
            Reply(
                status=302,
                headers=(("Location", "http://[64:ff9b::7f00:1]:9/"),),
                content_type="text/plain",
            )
        )
        ctx, _ = make_context(tmp_path)
        with pytest.raises(ToolError, match=r"loopback address \(127\.0\.0\.1\)"):
            await WebFetchTool().run({"url": f"{server.base_url}/start"}, ctx)
    assert hops == [f"{server.base_url}/start", "http://[64:ff9b::7f00:1]:9/"]


@pytest.mark.parametrize(
    "raw", ["ftp://example.com/", "file:///etc/passwd", "http://", "not a url", "http://u:p@h/"]
)
def test_only_plain_http_urls_are_accepted(raw: str) -> None:
    with pytest.raises(ToolError):
        parse_web_url(raw)


SILENT_SERVER_DEADLINE_SECS = 20
"""Ample for a request and its cancellation on a loaded machine; a hang fails here, fast."""


async def fetch(url: str, web: WebConfig, tmp_path: Path) -> str:
    ctx, _ = make_context(tmp_path)
    return (await WebFetchTool(web).run({"url": url}, ctx)).text


async def test_loopback_is_refused_by_default_and_reached_when_allowed(tmp_path: Path) -> None:
    async with serve_fake_llm(page("<p>hello <b>web</b></p>")) as server:
        with pytest.raises(ToolError, match=r"loopback address.*allow_private_hosts"):
            await fetch(f"{server.base_url}/doc", WebConfig(), tmp_path)
        with pytest.raises(ToolError, match="loopback"):
            await fetch(f"http://localhost:{server.port}/doc", WebConfig(), tmp_path)
        assert server.requests == []
        assert await fetch(f"{server.base_url}/doc", OPEN, tmp_path) == "hello **web**"
    assert server.requests[0].headers["host"] == f"127.0.0.1:{server.port}"


async def test_redirects_are_followed_and_checked(tmp_path: Path) -> None:
    async with serve_fake_llm() as server:
        server.add(
            Reply(status=302, headers=(("Location", "/final"),), content_type="text/plain"),
            page("arrived", content_type="text/plain"),
        )
        assert await fetch(f"{server.base_url}/start", OPEN, tmp_path) == "arrived"
        assert [r.target for r in server.requests] == ["/start", "/final"]


async def test_links_are_resolved_against_the_page_reached(tmp_path: Path) -> None:
    async with serve_fake_llm() as server:
        server.add(
            Reply(status=302, headers=(("Location", "/docs/guide/"),), content_type="text/plain"),
            page(
                '<p>See <a href="../api?q=1">the API</a> or <a href="javascript:go()">run</a>.</p>'
            ),
        )
        text = await fetch(f"{server.base_url}/start", OPEN, tmp_path)
    assert text == f"See [the API]({server.base_url}/docs/api?q=1) or run."


async def test_big_pages_are_cut_and_binary_is_refused(tmp_path: Path) -> None:
    async with serve_fake_llm() as server:
        server.add(page("x" * (DEFAULT_WEB_FETCH_MAX_BYTES + 10), content_type="text/plain"))
        server.add(page("PNG", content_type="image/png"))
        server.add(page("gone", status=404))
        text = await fetch(f"{server.base_url}/big", OPEN, tmp_path)
        assert text.startswith("x" * DEFAULT_WEB_FETCH_MAX_BYTES)
        assert text.endswith(
            f"[truncated: the body is larger than {DEFAULT_WEB_FETCH_MAX_BYTES} bytes]"
        )
        with pytest.raises(ToolError, match="not text"):
            await fetch(f"{server.base_url}/img", OPEN, tmp_path)
        with pytest.raises(ToolError, match="HTTP 404"):
            await fetch(f"{server.base_url}/gone", OPEN, tmp_path)


async def test_http_request_sends_method_headers_and_body(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path)
    tool = HttpRequestTool(OPEN)
    async with serve_fake_llm(
        page('{"ok": true}', status=201, content_type="application/json")
    ) as server:
        output = await tool.run(
            {
                "url": f"{server.base_url}/api",
                "method": "post",
                "headers": {"X-Token": "t1"},
                "body": '{"a": 1}',
            },
            ctx,
        )
        with pytest.raises(ToolError, match="Host cannot be set"):
            await tool.run({"url": server.base_url, "headers": {"Host": "evil"}}, ctx)
        with pytest.raises(ToolError, match="loopback"):
            await HttpRequestTool().run({"url": server.base_url}, ctx)
    assert output.ok
    assert output.text.startswith("Status: 201\nHeaders:\n")
    assert output.text.endswith('Body:\n{"ok": true}')
    request = server.requests[0]
    assert (request.method, request.target, request.body) == ("POST", "/api", b'{"a": 1}')
    assert request.headers["x-token"] == "t1"


async def test_a_silent_server_is_given_up_on_with_the_turn(tmp_path: Path) -> None:
    async with serve_fake_llm(Reply(ending="silent")) as server:
        with trio.fail_after(SILENT_SERVER_DEADLINE_SECS):
            with trio.CancelScope() as turn:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(fetch, server.base_url, OPEN, tmp_path)
                    # The turn is cancelled once the request has reached the silent server
                    # (not after a fixed delay, which a loaded machine may not have reached).
                    await poll_until(lambda: bool(server.requests))
                    turn.cancel()
            assert turn.cancelled_caught  # the fetch neither ended nor failed on its own
            await server.wait_client_gone()


def test_approval_defaults_follow_the_reference(tmp_path: Path) -> None:
    policy = SecurityPolicy(RiskProfileConfig(), tmp_path)
    fetch_tool, request_tool = WebFetchTool(), HttpRequestTool()
    fetch = policy.decide("web_fetch", {"url": "https://x"}, side_effects=fetch_tool.side_effects)
    request = policy.decide(
        "http_request", {"url": "https://x"}, side_effects=request_tool.side_effects
    )
    assert fetch.approval is Approval.ALLOW
    assert request.approval is Approval.ASK
    readonly = SecurityPolicy(RiskProfileConfig(level="readonly"), tmp_path)
    refused = readonly.decide("http_request", {}, side_effects=request_tool.side_effects)
    assert refused.approval is Approval.DENY
