"""The PROXY protocol parser (gateway/proxy_protocol.py): round trips, truncation, garbage."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.gateway.proxy_protocol import (
    MAX_PROXY_HEADER_BYTES,
    PROXY_V2_SIGNATURE,
    NeedMoreBytes,
    ProxyAddresses,
    ProxyCommand,
    ProxyHeader,
    ProxyHeaderError,
    decode_proxy_header,
    encode_proxy_v2,
    parse_proxy_header,
    signature_match,
)

ports = st.integers(min_value=0, max_value=65535)
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)
extensions = st.lists(
    st.tuples(st.integers(min_value=0, max_value=255), st.binary(max_size=40)), max_size=4
).map(tuple)


@st.composite
def addresses(draw: st.DrawFn) -> ProxyAddresses:
    family = draw(st.sampled_from([ipv4, ipv6]))
    return ProxyAddresses(draw(family), draw(ports), draw(family), draw(ports))


@given(addresses(), extensions, st.binary(max_size=64))
def test_a_v2_header_round_trips_and_the_bytes_after_it_are_not_taken(
    relayed: ProxyAddresses, tlvs: tuple[tuple[int, bytes], ...], after: bytes
) -> None:
    encoded = encode_proxy_v2(ProxyCommand.PROXY, relayed, tlvs)
    parsed = parse_proxy_header(encoded + after)
    assert parsed == ProxyHeader(2, ProxyCommand.PROXY, relayed, tlvs, len(encoded))


@given(addresses(), extensions, st.data())
def test_every_truncated_v2_header_asks_for_more_and_decode_says_truncated(
    relayed: ProxyAddresses, tlvs: tuple[tuple[int, bytes], ...], data: st.DataObject
) -> None:
    encoded = encode_proxy_v2(ProxyCommand.PROXY, relayed, tlvs)
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    need = parse_proxy_header(encoded[:cut])
    assert isinstance(need, NeedMoreBytes)
    assert 1 <= need.count <= len(encoded) - cut  # never asks for a byte past the header
    with pytest.raises(ProxyHeaderError, match="truncated PROXY protocol header"):
        decode_proxy_header(encoded[:cut])


def _outcome(data: bytes) -> ProxyHeader | NeedMoreBytes | ProxyHeaderError:
    try:
        return parse_proxy_header(data)
    except ProxyHeaderError as exc:
        return exc


@given(st.binary(max_size=300))
def test_any_bytes_give_a_header_a_request_for_more_or_a_clear_error(data: bytes) -> None:
    outcome = _outcome(data)
    if isinstance(outcome, ProxyHeaderError):
        assert "PROXY" in str(outcome)
    else:
        assert isinstance(outcome, NeedMoreBytes | ProxyHeader)


@given(st.binary(min_size=4, max_size=40))
def test_bytes_after_the_v2_signature_never_crash_the_parser(rest: bytes) -> None:
    outcome = _outcome(PROXY_V2_SIGNATURE + rest)
    if isinstance(outcome, ProxyHeaderError):
        assert "PROXY v2" in str(outcome)


def test_local_and_unspecified_headers_carry_no_client_address() -> None:
    local = decode_proxy_header(encode_proxy_v2(ProxyCommand.LOCAL))
    assert (local.command, local.addresses) == (ProxyCommand.LOCAL, None)
    relayed = ProxyAddresses("10.1.2.3", 5000, "10.0.0.1", 443)
    # A LOCAL header may still carry addresses: they are not the client's.
    local_with = decode_proxy_header(encode_proxy_v2(ProxyCommand.LOCAL, relayed))
    assert local_with.addresses is None


def test_a_v2_header_over_the_size_limit_is_refused_before_it_is_read() -> None:
    big = encode_proxy_v2(ProxyCommand.PROXY, None, ((0x04, b"x" * MAX_PROXY_HEADER_BYTES),))
    with pytest.raises(ProxyHeaderError, match=f"over the {MAX_PROXY_HEADER_BYTES}-byte limit"):
        parse_proxy_header(big[:16])  # the fixed part alone says how long it is


@pytest.mark.parametrize(
    ("fixed", "problem"),
    [
        (bytes([0x11, 0x11, 0, 12]), "version 1"),
        (bytes([0x2F, 0x11, 0, 12]), "unknown command"),
        (bytes([0x21, 0x51, 0, 12]), "unknown address family"),
        (bytes([0x21, 0x11, 0, 4]), "too short for its addresses"),
    ],
)
def test_broken_v2_fields_are_named(fixed: bytes, problem: str) -> None:
    with pytest.raises(ProxyHeaderError, match=problem):
        decode_proxy_header(PROXY_V2_SIGNATURE + fixed + b"\0" * 12)


def test_a_cut_extension_is_an_error() -> None:
    header = bytearray(encode_proxy_v2(ProxyCommand.PROXY, None, ((0x01, b"h2"),)))
    header[-3:-2] = b"\x09"  # the extension's length now says 9 bytes, 2 follow
    with pytest.raises(ProxyHeaderError, match="says 9 bytes, 2 are left"):
        decode_proxy_header(bytes(header))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\r\n", ("203.0.113.7", 56324)),
        (b"PROXY TCP6 2001:db8::7 2001:db8::1 4000 80\r\n", ("2001:db8::7", 4000)),
        (b"PROXY UNKNOWN whatever follows\r\n", None),
    ],
)
def test_v1_lines(line: bytes, expected: tuple[str, int] | None) -> None:
    parsed = decode_proxy_header(line + b"GET / HTTP/1.1\r\n")
    assert (parsed.version, parsed.length) == (1, len(line))
    got = parsed.addresses
    assert (None if got is None else (got.source_ip, got.source_port)) == expected


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"PROXY TCP4 203.0.113.7 10.0.0.1 56324\r\n", "must be `PROXY TCP4"),
        (b"PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n", "is not IPv4"),
        (b"PROXY TCP4 host 10.0.0.1 1 2\r\n", "not an IP address"),
        (b"PROXY TCP4 10.0.0.7 10.0.0.1 65536 2\r\n", "0 to 65535"),
        (b"PROXY TCP4 10.0.0.7 10.0.0.1 080 2\r\n", "0 to 65535"),
        (b"PROXY " + b"9" * 120, "longer than 107 bytes"),
    ],
)
def test_broken_v1_lines_are_named(line: bytes, problem: str) -> None:
    with pytest.raises(ProxyHeaderError, match=problem):
        parse_proxy_header(line)


@given(ipv4, ipv4, ports, ports)
def test_v1_tcp4_lines_round_trip(source: str, destination: str, sport: int, dport: int) -> None:
    line = f"PROXY TCP4 {source} {destination} {sport} {dport}\r\n".encode()
    parsed = decode_proxy_header(line)
    assert parsed.addresses == ProxyAddresses(source, sport, destination, dport)


def test_signature_match_decides_as_soon_as_it_can() -> None:
    assert signature_match(b"") == "undecided"
    assert signature_match(b"P") == "undecided"  # could still be "PROXY "
    assert signature_match(b"PO") == "other"  # POST
    assert signature_match(b"PROXY ") == "proxy"
    assert signature_match(PROXY_V2_SIGNATURE[:5]) == "undecided"
    assert signature_match(PROXY_V2_SIGNATURE) == "proxy"
    assert signature_match(b"\x16\x03\x01") == "other"  # a TLS ClientHello


def test_encoding_refuses_mixed_families() -> None:
    mixed = ProxyAddresses("10.0.0.1", 1, str(ipaddress.ip_address("::1")), 2)
    with pytest.raises(ValueError, match="one IP version"):
        encode_proxy_v2(ProxyCommand.PROXY, mixed)
