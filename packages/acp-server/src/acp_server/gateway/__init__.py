"""`zeroclaw gateway`: ACP over WebSocket at /acp, pairing and token auth."""
