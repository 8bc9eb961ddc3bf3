"""The I/O that tools and providers share, at the bottom of the agent.

``uploads.py`` is the workspace's content-addressed ``uploads/`` directory: the prompt's
blobs a provider reads back and the files a tool delivers. ``http_clients.py`` holds the
long-lived HTTP connection pools: one per model provider, two for the web tools; app.py
closes them when the server stops. Neither imports anything else of the agent, so both
tools and providers can use them.
"""
