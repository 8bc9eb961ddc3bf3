"""What a session may do and spend: one room for both kinds of limit.

``actions.py`` is the runtime profile's ``max_actions_per_hour`` (a sliding window of
counted tool calls per session); ``spend.py`` is the spending caps (the ``[cost]`` daily
and monthly limits and the profile's ``max_cost_per_day_cents``) over the spending ledger.
Their values are read from config.toml by acp_server/config/limits.py.
"""
