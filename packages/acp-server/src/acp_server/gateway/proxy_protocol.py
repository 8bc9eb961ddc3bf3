"""The PROXY protocol header a load balancer puts before a connection's first byte.

Pure functions, no I/O (the gateway's reader is gateway/client_address.py). Both versions
of HAProxy's specification "The PROXY protocol" are read:

* version 2, binary: the 12-byte signature, a version/command byte (``0x20`` LOCAL,
  ``0x21`` PROXY), a family/transport byte, a 2-byte big-endian length, then the addresses
  (IPv4: 12 bytes, IPv6: 36, UNIX: 216) and type-length-value extensions;
* version 1, text: ``PROXY TCP4|TCP6 <src> <dst> <sport> <dport>\\r\\n`` or
  ``PROXY UNKNOWN...\\r\\n``, at most 107 bytes.

``parse_proxy_header`` is incremental: given the bytes received so far it returns the header,
or how many more bytes it needs at least (so a reader never takes bytes past the header), or
raises ``ProxyHeaderError`` with what is wrong. ``encode_proxy_v2`` builds a version 2 header
(what the tests and benchmarks send as a load balancer would).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Literal

from acp_server.errors import ZeroclawError

PROXY_V2_SIGNATURE: Final = b"\r\n\r\n\x00\r\nQUIT\n"
PROXY_V1_PREFIX: Final = b"PROXY "
PROXY_V2_FIXED_BYTES: Final = 16
"""Signature, version/command, family/transport and the 2-byte length."""
MAX_PROXY_V1_BYTES: Final = 107
"""The specification's longest version 1 line, CRLF included."""
MAX_PROXY_HEADER_BYTES: Final = 4096
"""A version 2 header longer than this (addresses and extensions) is refused: HAProxy's
own extensions (ALPN, authority, unique id, TLS details) stay well below it."""

_ADDRESS_BYTES: Final = {1: 12, 2: 36, 3: 216}
"""Address block length per version 2 address family (INET, INET6, UNIX)."""


class ProxyCommand(IntEnum):
    LOCAL = 0
    """The proxy's own connection (a health check): use the socket's addresses."""
    PROXY = 1
    """A relayed connection: the header's source is the real client."""


class ProxyHeaderError(ZeroclawError):
    """The bytes are not a valid PROXY protocol header; the message says why."""


@dataclass(frozen=True, slots=True)
class ProxyAddresses:
    """The relayed connection's endpoints; IP families only (UNIX paths are not kept)."""

    source_ip: str
    source_port: int
    destination_ip: str
    destination_port: int


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    """A parsed header; ``addresses`` is None for LOCAL, UNSPEC/UNIX families and
    ``PROXY UNKNOWN``. ``length`` is how many bytes the header took."""

    version: Literal[1, 2]
    command: ProxyCommand
    addresses: ProxyAddresses | None
    extensions: tuple[tuple[int, bytes], ...]
    length: int


@dataclass(frozen=True, slots=True)
class NeedMoreBytes:
    """The header is incomplete: at least ``count`` more bytes are needed."""

    count: int


SignatureMatch = Literal["proxy", "other", "undecided"]


def signature_match(data: bytes) -> SignatureMatch:
    """Whether ``data`` (a connection's first bytes) starts a PROXY header: ``proxy`` once a
    whole signature is there, ``other`` as soon as it differs from both, else ``undecided``."""
    for signature in (PROXY_V2_SIGNATURE, PROXY_V1_PREFIX):
        if data[: len(signature)] == signature[: len(data)]:
            return "proxy" if len(data) >= len(signature) else "undecided"
    return "other"


def parse_proxy_header(
    data: bytes, *, max_bytes: int = MAX_PROXY_HEADER_BYTES
) -> ProxyHeader | NeedMoreBytes:
    """The header at the start of ``data`` (bytes past it are ignored), or how many more
    bytes are needed.

    Raises:
        ProxyHeaderError: not a PROXY header, malformed, or longer than ``max_bytes``.
    """
    match = signature_match(data)
    if match == "other":
        raise ProxyHeaderError("not a PROXY protocol header (no v1 or v2 signature)")
    if data[:1] == PROXY_V2_SIGNATURE[:1]:
        if match == "undecided":
            return NeedMoreBytes(len(PROXY_V2_SIGNATURE) - len(data))
        return _parse_v2(data, max_bytes)
    if match == "undecided":
        return NeedMoreBytes(len(PROXY_V1_PREFIX) - len(data))
    return _parse_v1(data)


def decode_proxy_header(data: bytes, *, max_bytes: int = MAX_PROXY_HEADER_BYTES) -> ProxyHeader:
    """The header at the start of ``data``, which must hold all of it.

    Raises:
        ProxyHeaderError: as ``parse_proxy_header``, or the header is truncated.
    """
    parsed = parse_proxy_header(data, max_bytes=max_bytes)
    if isinstance(parsed, NeedMoreBytes):
        raise ProxyHeaderError(
            f"truncated PROXY protocol header: {len(data)} bytes, at least {parsed.count} missing"
        )
    return parsed


def _parse_v2(data: bytes, max_bytes: int) -> ProxyHeader | NeedMoreBytes:
    if len(data) < PROXY_V2_FIXED_BYTES:
        return NeedMoreBytes(PROXY_V2_FIXED_BYTES - len(data))
    version, command_code = data[12] >> 4, data[12] & 0x0F
    if version != 2:
        raise ProxyHeaderError(f"PROXY v2 header with version {version} (must be 2)")
    if command_code not in (ProxyCommand.LOCAL, ProxyCommand.PROXY):
        raise ProxyHeaderError(f"PROXY v2 header with unknown command {command_code:#x}")
    family, transport = data[13] >> 4, data[13] & 0x0F
    if family > 3 or transport > 2:
        raise ProxyHeaderError(f"PROXY v2 header with unknown address family {data[13]:#04x}")
    (body_length,) = struct.unpack_from("!H", data, 14)
    total = PROXY_V2_FIXED_BYTES + body_length
    if total > max_bytes:
        raise ProxyHeaderError(
            f"PROXY v2 header of {total} bytes is over the {max_bytes}-byte limit"
        )
    if len(data) < total:
        return NeedMoreBytes(total - len(data))
    body = data[PROXY_V2_FIXED_BYTES:total]
    address_bytes = _ADDRESS_BYTES.get(family, 0)
    if len(body) < address_bytes:
        raise ProxyHeaderError(
            f"PROXY v2 header too short for its addresses: {len(body)} of {address_bytes} bytes"
        )
    command = ProxyCommand(command_code)
    addresses = None
    if command is ProxyCommand.PROXY and family in (1, 2):
        addresses = _v2_addresses(body, family)
    return ProxyHeader(2, command, addresses, _extensions(body[address_bytes:]), total)


def _v2_addresses(body: bytes, family: int) -> ProxyAddresses:
    size = 4 if family == 1 else 16
    source = ipaddress.ip_address(body[:size])
    destination = ipaddress.ip_address(body[size : 2 * size])
    source_port, destination_port = struct.unpack_from("!HH", body, 2 * size)
    return ProxyAddresses(str(source), source_port, str(destination), destination_port)


def _extensions(data: bytes) -> tuple[tuple[int, bytes], ...]:
    extensions: list[tuple[int, bytes]] = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < 3:
            raise ProxyHeaderError("PROXY v2 extension cut short (less than 3 bytes left)")
        kind, length = data[offset], struct.unpack_from("!H", data, offset + 1)[0]
        end = offset + 3 + length
        if end > len(data):
            raise ProxyHeaderError(
                f"PROXY v2 extension {kind:#04x} says {length} bytes, "
                f"{len(data) - offset - 3} are left"
            )
        extensions.append((kind, data[offset + 3 : end]))
        offset = end
    return tuple(extensions)


def _parse_v1(data: bytes) -> ProxyHeader | NeedMoreBytes:
    end = data.find(b"\r\n", 0, MAX_PROXY_V1_BYTES)
    if end == -1:
        if len(data) >= MAX_PROXY_V1_BYTES:
            raise ProxyHeaderError(
                f"PROXY v1 line longer than {MAX_PROXY_V1_BYTES} bytes (no CRLF)"
            )
        return NeedMoreBytes(1)
    line = data[len(PROXY_V1_PREFIX) : end]
    fields = line.split(b" ")
    if fields[0] == b"UNKNOWN":
        return ProxyHeader(1, ProxyCommand.PROXY, None, (), end + 2)
    if fields[0] not in (b"TCP4", b"TCP6") or len(fields) != 5:
        raise ProxyHeaderError(
            "PROXY v1 line must be `PROXY TCP4|TCP6 <src> <dst> <sport> <dport>` or `PROXY UNKNOWN`"
        )
    wanted = 4 if fields[0] == b"TCP4" else 6
    source = _v1_ip(fields[1], wanted)
    destination = _v1_ip(fields[2], wanted)
    addresses = ProxyAddresses(source, _v1_port(fields[3]), destination, _v1_port(fields[4]))
    return ProxyHeader(1, ProxyCommand.PROXY, addresses, (), end + 2)


def _v1_ip(raw: bytes, version: int) -> str:
    try:
        address = ipaddress.ip_address(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ProxyHeaderError(f"PROXY v1 address {raw!r} is not an IP address") from None
    if address.version != version:
        raise ProxyHeaderError(f"PROXY v1 address {raw!r} is not IPv{version}")
    return str(address)


def _v1_port(raw: bytes) -> int:
    if not raw.isdigit() or len(raw) > 5 or (len(raw) > 1 and raw[:1] == b"0"):
        raise ProxyHeaderError(f"PROXY v1 port {raw!r} is not a number from 0 to 65535")
    port = int(raw)
    if port > 65535:
        raise ProxyHeaderError(f"PROXY v1 port {raw!r} is not a number from 0 to 65535")
    return port


def encode_proxy_v2(
    command: ProxyCommand,
    addresses: ProxyAddresses | None = None,
    extensions: tuple[tuple[int, bytes], ...] = (),
) -> bytes:
    """A version 2 header (STREAM transport; family from the addresses, UNSPEC without)."""
    if addresses is None:
        family_byte, address_block = 0x00, b""
    else:
        source = ipaddress.ip_address(addresses.source_ip)
        destination = ipaddress.ip_address(addresses.destination_ip)
        if source.version != destination.version:
            raise ValueError("source and destination must be of one IP version")
        family_byte = 0x11 if source.version == 4 else 0x21
        address_block = (
            source.packed
            + destination.packed
            + struct.pack("!HH", addresses.source_port, addresses.destination_port)
        )
    tail = b"".join(struct.pack("!BH", kind, len(value)) + value for kind, value in extensions)
    body = address_block + tail
    return (
        PROXY_V2_SIGNATURE
        + bytes([0x20 | command, family_byte])
        + struct.pack("!H", len(body))
        + body
    )
