"""What a connection's methods are served from, apart from the connection itself.

``context.py`` holds ``AcpApp``, the process-wide state every connection shares (the
configuration, the session store, the factories, the spending ledger, which connection
holds each live session). The composition root (acp_server/app.py) builds it; stdio and
the gateway serve connections over it.
"""
