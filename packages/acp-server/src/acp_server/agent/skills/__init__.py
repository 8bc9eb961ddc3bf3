"""A workspace's skills: read, listed in the prompt, offered as tools and slash commands.

``loader.py`` finds and reads the skill directories; ``manifest.py`` parses one skill's
``SKILL.md`` or ``SKILL.toml``; ``prompt_section.py`` writes the prompt's skills section;
``tools.py`` turns a skill's ``[[tools]]`` into tools through ``templates.py``, which quotes
each argument for where it stands in the command line; ``commands.py`` holds the slash
commands. The prompt (acp_server/agent/prompt/) sits above this room and reads it; this
room never reads the prompt: a session hands ``SkillCommands.use`` the skills it loaded.
"""
