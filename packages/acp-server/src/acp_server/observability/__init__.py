"""What an operator watches a server by: metrics (``metrics.py``, recorded by every layer
through one ``Metrics`` object; ``prometheus.py``, the gateway's ``/metrics``) and the log
line's context (``logs.py``: principal, session, turn, correlation id; the JSON format).

It sits at the bottom of the layer order (docs/architecture.md) so that any layer may record
a metric or tag a log line with one call, and it imports nothing of the server above it.
"""
