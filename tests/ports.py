"""Free 127.0.0.1 TCP ports for servers whose port a test must know before they start.

A server that can listen on port 0 and announce what it got (``zeroclaw gateway --port 0``)
needs none of this. The others (PostgreSQL, HAProxy, a gateway a bridge reconnects to on
the same port after a restart) take a port from ``unused_port``, which closes the race
between "this port is free" and the server's bind that a plain port-0 probe leaves open
when tests run in parallel:

* the port lies below the kernel's ephemeral range (``net.ipv4.ip_local_port_range``), so
  neither a port-0 bind nor an outgoing connection of any process is given it meanwhile;
* each pytest-xdist worker draws from a block of its own, so two workers never pick the
  same port, and one process never hands out the same port twice in a row;
* a probe bind skips ports another program is using, and a random start in the block keeps
  two test runs on one machine apart.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Mapping
from typing import Final

PORTS_BELOW_EPHEMERAL: Final = 12_000
"""How many ports under the ephemeral range the tests use (split among the workers)."""
_DEFAULT_EPHEMERAL_LOW: Final = 32768
_MIN_PORT: Final = 1024
_MIN_BLOCK: Final = 50


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as sysctl:
            return int(sysctl.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_LOW


def worker_block(environ: Mapping[str, str], ephemeral_start: int) -> range:
    """The ports of the xdist worker ``environ`` names (``PYTEST_XDIST_WORKER`` and
    ``_COUNT``; the whole span outside xdist), below ``ephemeral_start``."""
    start = max(_MIN_PORT, ephemeral_start - PORTS_BELOW_EPHEMERAL)
    workers = max(1, int(environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % workers if worker.isdigit() else 0
    size = (ephemeral_start - start) // workers
    return range(start + index * size, start + (index + 1) * size)


_BLOCK: Final = worker_block(os.environ, ephemeral_low())
_next = random.randrange(len(_BLOCK)) if len(_BLOCK) >= _MIN_BLOCK else 0


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _any_free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def unused_port() -> int:
    """A 127.0.0.1 TCP port nothing listens on, that no other test of this run is given
    (see the module docstring); a plain free port where the block is too small."""
    global _next
    if len(_BLOCK) < _MIN_BLOCK:
        return _any_free_port()
    for _ in range(len(_BLOCK)):
        port = _BLOCK[_next]
        _next = (_next + 1) % len(_BLOCK)
        if _bindable(port):
            return port
    return _any_free_port()
