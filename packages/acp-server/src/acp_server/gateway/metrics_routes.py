"""``GET /metrics``: the gateway's Prometheus metrics (observability/prometheus.py).

On the gateway's own port the route is guarded like the admin routes (gateway/handlers.py:
a loopback peer carrying the admin secret): the series say who is busy and what it costs,
and that port may face every client. ``[gateway] metrics_listen`` (or ``--metrics-listen``)
opens a second listener that answers ``GET /metrics`` and nothing else, without the secret,
for a Prometheus on the monitoring network (docs/deployment.md, "Monitoring").
"""

from __future__ import annotations

import logging
from typing import Final

import trio

from acp_server.gateway.http import read_request_or_refuse, send_response
from acp_server.gateway.routes import Exchange
from acp_server.observability.metrics import Metrics
from acp_server.observability.prometheus import PrometheusMetrics

logger = logging.getLogger(__name__)

METRICS_PATH: Final = "/metrics"
MAX_SCRAPES_AT_ONCE: Final = 8
"""Connections the metrics listener serves at once; more wait to be accepted (a scraper
needs one, so a flood cannot make the gateway hold many sockets for it)."""
SCRAPE_REQUEST_TIMEOUT_SECS: Final = 5.0
"""A scraper sends its request head within this, or the socket is closed."""
ACCEPT_RETRY_SECS: Final = 0.1
"""Pause after a failed accept (out of file descriptors): as the main listener does."""


async def send_metrics(metrics: Metrics, stream: trio.abc.Stream) -> None:
    if not isinstance(metrics, PrometheusMetrics):
        await send_response(stream, 404, "Not found - this server keeps no metrics\n")
        return
    body, content_type = metrics.exposition()
    await send_response(stream, 200, body, content_type=content_type)


async def serve_metrics(metrics: Metrics, exchange: Exchange) -> None:
    """The route on the gateway's port (its guard has let the operator in)."""
    await send_metrics(metrics, exchange.stream)


async def serve_metrics_listener(
    metrics: Metrics,
    host: str,
    port: int,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Answer ``GET /metrics`` on ``host:port`` until cancelled; ``task_status`` gets the
    bound port.

    Raises:
        OSError: the address cannot be bound.
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = int(listeners[0].socket.getsockname()[1])
    slots = trio.Semaphore(MAX_SCRAPES_AT_ONCE)
    async with trio.open_nursery() as nursery:
        task_status.started(bound)
        for listener in listeners:
            nursery.start_soon(_accept_scrapes, metrics, listener, slots)


async def _accept_scrapes(
    metrics: Metrics, listener: trio.SocketListener, slots: trio.Semaphore
) -> None:
    async def answer(stream: trio.abc.Stream) -> None:
        try:
            await _answer_scrape(metrics, stream)
        finally:
            slots.release()

    async with listener, trio.open_nursery() as nursery:
        while True:
            # A slot first: connections beyond the cap wait in the kernel's backlog.
            await slots.acquire()
            try:
                stream = await listener.accept()
            except OSError as exc:
                slots.release()
                logger.warning("metrics listener: accept failed: %s; retrying", exc)
                await trio.sleep(ACCEPT_RETRY_SECS)
                continue
            nursery.start_soon(answer, stream)


async def _answer_scrape(metrics: Metrics, stream: trio.abc.Stream) -> None:
    async with stream:
        try:
            with trio.move_on_after(SCRAPE_REQUEST_TIMEOUT_SECS):
                request = await read_request_or_refuse(stream)
                if request is None:
                    return
                if request.path != METRICS_PATH:
                    await send_response(stream, 404, f"Not found - only {METRICS_PATH} here\n")
                elif request.method != "GET":
                    await send_response(
                        stream, 405, "Method not allowed\n", headers=[("Allow", "GET")]
                    )
                else:
                    await send_metrics(metrics, stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the scraper went away
