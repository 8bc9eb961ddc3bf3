"""A session and its turns: the top room of the agent.

``session.py`` is a session's live state (history, plan, tools, policy, the prompt files
it re-reads) and its one running ``Turn``; ``turn.py`` runs one prompt turn (model
rounds, the policy's decision on each tool call, approvals, tool runs, the outcome);
``turn_io.py`` is the port a turn reports its events through (the protocol renders them);
``permissions.py`` is what the turn does with an operator's verdict; ``factory.py`` the
factories a session's tools and policy come from. It reads every room below: prompt,
skills, limits, tools, providers and io.
"""
