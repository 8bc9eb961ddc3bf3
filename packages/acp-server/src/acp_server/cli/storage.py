"""``zeroclaw storage migrate`` and ``zeroclaw storage import-sqlite PATH``: the session
store's schema, and moving sessions from an SQLite file into the PostgreSQL store."""

from __future__ import annotations

from pathlib import Path

import click

from acp_server.cli.main import EXIT_CONFIG_ERROR, CliState, fail
from acp_server.storage import StoreError


@click.group("storage")
def storage_command() -> None:
    """The session store: where sessions live ([storage] url, else the SQLite file).

    With `[storage] url = "postgresql://..."` in config.toml (or ZEROCLAW_STORAGE_URL) every
    `zeroclaw acp` and `zeroclaw gateway` shares one PostgreSQL database; without it each
    machine keeps its sessions in <workspace_dir>/sessions/acp-sessions.db.
    """


@storage_command.command("migrate")
@click.pass_obj
def migrate_command(state: CliState) -> None:
    """Create or upgrade the session store's schema, then exit.

    The servers migrate on start-up too; run this before a rolling upgrade so that no
    replica waits on the migration while it starts. Migrations run in one transaction
    under a PostgreSQL advisory lock, so replicas starting meanwhile wait and then find
    nothing left to do. Exits 1 when the store cannot be reached or is newer than this
    zeroclaw.
    """
    config = state.load()
    try:
        if config.storage.url is not None:
            from acp_server.storage.postgres import PG_SCHEMA_VERSION, PostgresSessionStore

            store = PostgresSessionStore.open(config.storage.url)
            before = store.migrated_from
            store.close()
            where, version = store.location, PG_SCHEMA_VERSION
        else:
            from acp_server.storage.sqlite import SCHEMA_VERSION, SessionStore

            SessionStore.open(config.store_path).close()
            before, where, version = None, str(config.store_path), SCHEMA_VERSION
    except StoreError as exc:
        fail(str(exc))
    if before is not None and before < version:
        click.echo(f"{where}: migrated from schema {before} to {version}")
    else:
        click.echo(f"{where}: schema {version}, up to date")


@storage_command.command("import-sqlite")
@click.argument(
    "path", type=click.Path(dir_okay=False, exists=True, path_type=Path), metavar="PATH"
)
@click.pass_obj
def import_sqlite_command(state: CliState, path: Path) -> None:
    """Copy the sessions of the SQLite store at PATH into the PostgreSQL store.

    PATH is an acp-sessions.db (by default <workspace_dir>/sessions/acp-sessions.db).
    Every session is copied whole (turns, plans, tool results, titles, timestamps), one
    transaction each. A session whose id the database already holds is skipped, so
    running the import twice, or again after it was interrupted, copies nothing twice.
    The SQLite file is left in place (an older one is migrated first, as `zeroclaw acp`
    would). Needs [storage] url (or ZEROCLAW_STORAGE_URL): exits 2 without it, 1 when
    either store cannot be used.
    """
    config = state.load()
    if config.storage.url is None:
        fail(
            "import-sqlite copies into the PostgreSQL store that [storage] url (or "
            "ZEROCLAW_STORAGE_URL) names, and none is configured",
            code=EXIT_CONFIG_ERROR,
        )
    from acp_server.storage.postgres import PostgresSessionStore
    from acp_server.storage.postgres.importer import import_sessions
    from acp_server.storage.sqlite.export import exported_sessions

    try:
        store = PostgresSessionStore.open(config.storage.url)
        try:
            report = import_sessions(exported_sessions(path), str(path), store)
        finally:
            store.close()
    except StoreError as exc:
        fail(str(exc))
    click.echo(
        f"{path} -> {store.location}: {report.copied} sessions copied"
        f" ({report.messages} messages), {report.already_there} already there"
    )
