"""What each ACP method does, over the peer's ``Outbound`` (protocol/outbound.py): never
the connection itself, so a service can be driven without a transport.

* ``connection_state.py``: ``ConnectionState``, what every service of one connection works
  on (the app, the peer, the session table, the running prompts);
* the methods: ``handshake.py`` (initialize), ``lifecycle.py`` (new, load, resume, close,
  stop, delete, the restore of a reaped session, building a ``Session``), ``prompt.py``
  (prompt, cancel, ``$/cancel_request``, titles, the unsaved-turn warning),
  ``listing.py`` (session/list), ``fork.py``, ``modes.py``, ``config_options.py``;
* a connection's sessions: ``session_table.py`` (the table), ``session_state.py`` (its
  states and the one table of their moves);
* what the methods share: ``ownership.py`` (one live copy per session; the fencing
  epoch), ``replica_leases.py`` (the same across replicas), ``visibility.py`` (which
  principal sees which session), ``roots.py`` (cwd and extra roots), ``restore_replay.py``
  (what session/load sends before it answers), ``titles.py``, ``followups.py`` (what is
  sent right after a reply), ``auth_methods.py``;
* ``context.py``: ``AcpApp``, the process-wide state every connection shares. The
  composition root (acp_server/app.py) builds it; stdio and the gateway serve connections
  over it.

The router (protocol/router.py) pairs each method with its service; nothing here imports
``protocol.connection`` or the router (the ``protocol-rooms`` import contract).
"""
