"""The system prompt and the files it is built from.

``system_prompt.py`` assembles the prompt a session sends (its sections in order, the
project instructions, the date, the tool and skill sections) and keeps the reading of the
prompt files a session re-reads when they change; ``identity.py`` holds the personality
files a workspace is seeded with; ``aieos.py`` reads an AIEOS identity document. Where
those files are is read from config.toml by acp_server/config/agent_files.py.
"""
