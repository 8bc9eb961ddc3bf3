"""``zeroclaw sessions``: an administrator's view of the persisted ACP sessions.

``list`` shows every stored session, ``show ID`` one session's conversation, ``delete ID``
removes a session for good (session/close never does). All three read
``<workspace_dir>/sessions/acp-sessions.db``, or the PostgreSQL store of ``[storage] url``,
from the same configuration ``zeroclaw acp`` uses, so ``--config-dir`` must match the one
the server ran with.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import click

from acp_server.cli.main import EXIT_CONFIG_ERROR, fail
from acp_server.cli.render import terminal_safe
from acp_server.config import Config, ConfigError, load_config, resolve_config_dir
from acp_server.model import ChatMessage
from acp_server.storage import (
    SessionBackend,
    StoredSession,
    StoredSessionInfo,
    StoreError,
    StoreLocation,
    describe_location,
    open_backend,
    plan_entries_json,
)

EXIT_NOT_FOUND: Final = 1
OPERATOR_LABEL: Final = "(operator)"
"""The owner shown for a session of the local operator (stdio, or stored before principals)."""
EXIT_STORE_ERROR: Final = 1

_CONFIG_DIR_OPTION = click.option(
    "--config-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Directory holding config.toml (as for `zeroclaw acp`); the store is "
    "<workspace_dir>/sessions/acp-sessions.db of that configuration.",
)
_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _store_path(config_dir: Path | None) -> StoreLocation:
    """The store of the configuration in ``--config-dir`` (given here or before ``sessions``):
    its SQLite file, or the PostgreSQL store of ``[storage] url``."""
    if config_dir is None:
        root = click.get_current_context().find_root()
        inherited = root.params.get("config_dir")
        config_dir = inherited if isinstance(inherited, Path) else None
    try:
        config = load_config(resolve_config_dir(config_dir))
    except ConfigError as exc:
        fail(str(exc), code=EXIT_CONFIG_ERROR)
    return store_location(config)


def store_location(config: Config) -> StoreLocation:
    """Where ``config``'s sessions and ledger live: the PostgreSQL store of ``[storage] url``
    (or ``ZEROCLAW_STORAGE_URL``) when one is set, else its SQLite file."""
    return config.store_path if config.storage.url is None else config.storage.url


def _open_existing(path: StoreLocation) -> SessionBackend | None:
    """The store, or None when no session was ever persisted there (nothing is created)."""
    if isinstance(path, Path) and not path.exists():
        return None
    try:
        return open_backend(path)
    except StoreError as exc:
        fail(str(exc), code=EXIT_STORE_ERROR)


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _info_json(info: StoredSessionInfo) -> dict[str, Any]:
    return {
        "sessionId": info.session_id,
        "agent": info.agent_alias,
        "workspaceDir": info.workspace_dir,
        "createdAt": info.created_at.isoformat(),
        "lastActivity": info.last_activity.isoformat(),
        "messageCount": info.message_count,
        "turnCount": info.turn_count,
        "tokenCount": info.token_count,
        "title": info.title,
        "principal": info.principal,
    }


def _message_json(message: ChatMessage) -> dict[str, Any]:
    item: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning is not None:
        item["reasoning"] = message.reasoning
    if message.tool_calls:
        item["toolCalls"] = [
            {"id": call.id, "name": call.name, "arguments": call.arguments}
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        item["toolCallId"] = message.tool_call_id
    if message.tool_name is not None:
        item["toolName"] = message.tool_name
    return item


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]
    return "\n".join(lines)


@click.group("sessions")
def sessions_command() -> None:
    """Inspect or delete persisted ACP sessions (the store `zeroclaw acp` writes).

    Sessions are kept until deleted here; session/close in an editor only deactivates one.
    """


@sessions_command.command("list")
@_CONFIG_DIR_OPTION
@_JSON_OPTION
def list_command(config_dir: Path | None, as_json: bool) -> None:
    """List stored sessions, most recently active first."""
    path = _store_path(config_dir)
    store = _open_existing(path)
    infos: list[StoredSessionInfo] = []
    if store is not None:
        try:
            infos = store.list_sessions()
        except StoreError as exc:
            fail(str(exc), code=EXIT_STORE_ERROR)
        finally:
            store.close()
    if as_json:
        _print_json([_info_json(info) for info in infos])
        return
    if not infos:
        click.echo(f"No stored sessions in {describe_location(path)}")
        return
    rows = [
        (
            info.session_id,
            info.agent_alias,
            info.workspace_dir,
            _time(info.created_at),
            _time(info.last_activity),
            str(info.message_count),
            info.principal or OPERATOR_LABEL,
            info.title or "",
        )
        for info in infos
    ]
    headers = (
        "ID", "AGENT", "WORKSPACE", "CREATED", "LAST ACTIVITY", "MESSAGES", "OWNER", "TITLE"
    )  # fmt: skip
    click.echo(terminal_safe(plain_table(headers, rows)))


def _load(path: StoreLocation, session_id: str) -> StoredSession:
    store = _open_existing(path)
    if store is None:
        where = describe_location(path)
        fail(f"No stored session {session_id} (there is no store at {where})", code=EXIT_NOT_FOUND)
    try:
        stored = store.load_session(session_id)
    except StoreError as exc:
        fail(str(exc), code=EXIT_STORE_ERROR)
    finally:
        store.close()
    if stored is None:
        fail(
            f"No stored session {session_id} in {describe_location(path)}"
            " (see `zeroclaw sessions list`)",
            code=EXIT_NOT_FOUND,
        )
    return stored


def _say(line: str) -> None:
    """Print stored text for a person: control sequences removed (``terminal_safe``)."""
    click.echo(terminal_safe(line))


def _render_message(message: ChatMessage) -> list[str]:
    lines: list[str] = []
    if message.reasoning:
        lines.append(f"[{message.role} thinking] {message.reasoning}")
    if message.role == "tool":
        label = message.tool_name or "tool"
        lines.append(f"[{label} result {message.tool_call_id or '?'}] {message.content}")
    elif message.content or not message.tool_calls:
        lines.append(f"[{message.role}] {message.content}")
    for call in message.tool_calls:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        lines.append(f"[{message.role} calls {call.name} {call.id}] {arguments}")
    return lines


@sessions_command.command("show")
@click.argument("session_id", metavar="ID")
@_CONFIG_DIR_OPTION
@_JSON_OPTION
def show_command(session_id: str, config_dir: Path | None, as_json: bool) -> None:
    """Show one stored session: its metadata, conversation and latest plan."""
    stored = _load(_store_path(config_dir), session_id)
    if as_json:
        document = _info_json(stored.info)
        document["droppedMessages"] = stored.dropped_messages
        document["messages"] = [_message_json(message) for message in stored.messages]
        document["plan"] = None if stored.plan is None else plan_entries_json(stored.plan)
        _print_json(document)
        return
    info = stored.info
    _say(f"Session        {info.session_id}")
    _say(f"Agent          {info.agent_alias}")
    _say(f"Workspace      {info.workspace_dir}")
    _say(f"Created        {_time(info.created_at)}")
    _say(f"Last activity  {_time(info.last_activity)}")
    _say(f"Messages       {info.message_count} in {info.turn_count} turns")
    _say(f"Tokens         {info.token_count}")
    if stored.plan:
        _say("Plan")
        for entry in stored.plan:
            _say(f"  [{entry.status}] {entry.content}")
    if stored.messages:
        _say("")
        if stored.dropped_messages:
            _say(f"({stored.dropped_messages} older messages not shown)")
        for message in stored.messages:
            for line in _render_message(message):
                _say(line)


@sessions_command.command("delete")
@click.argument("session_id", metavar="ID")
@_CONFIG_DIR_OPTION
@_JSON_OPTION
def delete_command(session_id: str, config_dir: Path | None, as_json: bool) -> None:
    """Delete a stored session and its whole conversation (cannot be undone).

    An editor that still has the session open keeps it in memory until it closes it, but
    can no longer load or resume it afterwards.
    """
    path = _store_path(config_dir)
    store = _open_existing(path)
    deleted = False
    if store is not None:
        try:
            deleted = store.delete_session(session_id)
        except StoreError as exc:
            fail(str(exc), code=EXIT_STORE_ERROR)
        finally:
            store.close()
    if as_json:
        _print_json({"sessionId": session_id, "deleted": deleted})
    elif deleted:
        click.echo(f"Deleted session {session_id}")
    if not deleted:
        if not as_json:
            where = describe_location(path)
            click.echo(f"zeroclaw: error: No stored session {session_id} in {where}", err=True)
        sys.exit(EXIT_NOT_FOUND)
