"""Gateway authentication rules: token sources, digests, subprotocols, origins, hosts."""

from __future__ import annotations

import hashlib

import pytest

from acp_server.gateway.auth import (
    ACP_SUBPROTOCOL,
    TokenRegistry,
    hash_token,
    host_header_allowed,
    is_loopback_host,
    offered_subprotocols,
    origin_allowed,
    presented_token,
    select_subprotocol,
)

TOKEN = "zc_" + "ab" * 32


def test_hash_token_is_sha256_hex() -> None:
    assert hash_token(TOKEN) == hashlib.sha256(TOKEN.encode()).hexdigest()


def test_registry_accepts_only_paired_tokens() -> None:
    registry = TokenRegistry([hash_token(TOKEN).upper()])  # digests compared case-insensitively
    assert registry.verify(TOKEN) == hash_token(TOKEN)
    assert registry.verify(TOKEN + "x") is None
    assert registry.verify("") is None
    assert registry.verify("x" * 10_000) is None
    registry.clear()
    assert registry.verify(TOKEN) is None


def test_registry_ignores_duplicates_and_blank_digests() -> None:
    registry = TokenRegistry([hash_token(TOKEN), hash_token(TOKEN), "  "])
    assert len(registry) == 1


def test_authorization_header_wins_over_other_sources() -> None:
    headers = [
        (b"authorization", f"Bearer {TOKEN}".encode()),
        (b"sec-websocket-protocol", b"bearer.other"),
    ]
    found = presented_token(headers, {"token": "third"})
    assert found is not None
    assert (found.source, found.token) == ("authorization", TOKEN)


def test_bearer_scheme_is_case_insensitive() -> None:
    found = presented_token([(b"authorization", f"bearer   {TOKEN} ".encode())], {})
    assert found is not None
    assert found.token == TOKEN


def test_non_bearer_authorization_falls_through_to_the_subprotocol() -> None:
    headers = [
        (b"authorization", b"Basic dXNlcjpwYXNz"),
        (b"sec-websocket-protocol", f"{ACP_SUBPROTOCOL}, bearer.{TOKEN}".encode()),
    ]
    found = presented_token(headers, {})
    assert found is not None
    assert (found.source, found.token) == ("subprotocol", TOKEN)


def test_query_token_is_the_last_resort() -> None:
    found = presented_token([], {"token": TOKEN})
    assert found is not None
    assert found.source == "query"
    assert presented_token([], {"token": "  "}) is None
    assert presented_token([(b"sec-websocket-protocol", b"bearer.")], {}) is None


def test_subprotocols_across_repeated_headers() -> None:
    headers = [(b"sec-websocket-protocol", b"a, b"), (b"sec-websocket-protocol", b"c")]
    assert offered_subprotocols(headers) == ["a", "b", "c"]


def test_acp_subprotocol_selected_and_bearer_never_echoed() -> None:
    assert select_subprotocol([f"bearer.{TOKEN}", ACP_SUBPROTOCOL]) == ACP_SUBPROTOCOL
    assert select_subprotocol([f"bearer.{TOKEN}"]) is None
    assert select_subprotocol([]) is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("example.com", False),
    ],
)
def test_is_loopback_host(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:3000", True),
        ("http://127.0.0.1", True),
        ("https://[::1]:8443", True),
        ("http://evil.example", False),
        ("null", False),
        ("file://", False),
        ("https://ide.example.com", True),  # listed
        ("https://ide.example.com/", True),  # trailing slash ignored
    ],
)
def test_origin_allowed(origin: str, allowed: bool) -> None:
    assert origin_allowed(origin, ["https://ide.example.com"]) is allowed


def test_wildcard_allows_every_origin() -> None:
    assert origin_allowed("http://evil.example", ["*"])


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:42617", True),
        ("localhost:42617", True),
        ("[::1]:42617", True),
        ("rebound.evil.example:42617", False),
        ("ide.example.com", True),
        (None, False),
    ],
)
def test_host_header_guard(host: str | None, allowed: bool) -> None:
    assert host_header_allowed(host, ["https://ide.example.com"]) is allowed
