"""A session's directories: its ``cwd`` and the extra roots of ACP ``additionalDirectories``.

Every directory a client names is canonicalised the same way (``canonical_directory``:
symbolic links and ``..`` resolved, it must exist and be a directory) and becomes a root of
the session's path jail (acp_server/security/paths.py) and of its shell commands' OS
sandbox, which grant exactly the same set (acp_server/security/grants.py). A root that is
``/``, contains the server's config or data directory or its user's home, or is or contains
a forbidden path is refused with -32602 naming it (``grants.root_refusal``): on
``session/new``, ``session/load`` and ``session/resume``, and also when a stored session
carries one (stored before this rule, or by another server): its restore is refused until a
restore sends ``additionalDirectories`` to replace the stored list. The extra roots are
stored with the session, so ``session/load`` and ``session/resume`` restore them; a restore
that sends its own ``additionalDirectories`` replaces the stored list (ACP: the full list is
re-sent).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from acp_core.errors import InvalidParamsError
from acp_server.config import Config, RiskProfileConfig
from acp_server.errors import OperationFailed
from acp_server.protocol.limits import shortened
from acp_server.security.grants import root_refusal

if TYPE_CHECKING:
    from acp_server.agent.runtime.session import Session
    from acp_server.storage import AsyncSessionStore

logger = logging.getLogger(__name__)

MAX_SHOWN_PATH_CHARS: Final = 256
"""Most characters of a client's path an error message quotes back."""
DEFAULT_MAX_ADDITIONAL_DIRECTORIES: Final = 64
"""Most extra roots one session may have."""


def canonical_directory(raw: str, base: Path, label: str) -> Path:
    """``raw`` canonicalised (``~`` expanded, relative to ``base``, symlinks and ``..``
    resolved) so the jail it roots cannot be escaped.

    Raises:
        InvalidParamsError: ``<label> is not a usable directory (<path>): <reason>``.
    """
    shown = shortened(repr(raw)[1:-1], MAX_SHOWN_PATH_CHARS)  # escaped: NUL, newlines
    if "\0" in raw:
        # No path holds a NUL byte (the OS would refuse it as ValueError, not OSError).
        raise InvalidParamsError(
            f"{label} is not a usable directory ({shown}): contains a NUL byte"
        )
    try:
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = base / path
        resolved = path.resolve(strict=True)
        is_dir = resolved.is_dir()
    except (OSError, RuntimeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InvalidParamsError(f"{label} is not a usable directory ({shown}): {reason}") from None
    if not is_dir:
        raise InvalidParamsError(f"{label} is not a usable directory ({shown}): Not a directory")
    return resolved


def agent_risk_profile(config: Config, alias: str) -> RiskProfileConfig:
    """The risk profile the agent ``alias`` runs under (the default profile's values when
    it names none that exists)."""
    return config.risk_profiles.get(config.agents[alias].risk_profile, RiskProfileConfig())


def check_root(root: Path, label: str, profile: RiskProfileConfig, stored: str = "") -> Path:
    """``root`` when a session may be granted it.

    Raises:
        InvalidParamsError: ``<label> is not allowed (<root>): <why>``.
    """
    reason = root_refusal(root, profile)
    if reason is None:
        return root
    shown = shortened(str(root), MAX_SHOWN_PATH_CHARS)
    raise InvalidParamsError(f"{stored}{label} is not allowed ({shown}): {reason}")


def canonical_workspace(raw: str | None, launch_dir: Path, profile: RiskProfileConfig) -> Path:
    """The session's jail: ``cwd`` canonicalised (symlinks and ``..`` resolved) so it cannot
    escape, relative paths taken from the launch directory, omitted → the launch directory.

    Raises:
        InvalidParamsError: the path does not exist, is not a directory, or may not be a
            root (``check_root``).
    """
    if raw is None:
        return check_root(launch_dir.resolve(), "cwd (the server's launch directory)", profile)
    return check_root(canonical_directory(raw, launch_dir, "cwd"), "cwd", profile)


def canonical_roots(
    raw: Sequence[str] | None, workspace: Path, profile: RiskProfileConfig
) -> tuple[Path, ...]:
    """The extra roots of ``additionalDirectories``, each checked like ``cwd`` (relative
    entries are taken from the session's cwd), duplicates and the cwd itself dropped.

    Raises:
        InvalidParamsError: an entry is not a usable directory or may not be a root, or
            there are too many.
    """
    if not raw:
        return ()
    if len(raw) > DEFAULT_MAX_ADDITIONAL_DIRECTORIES:
        raise InvalidParamsError(
            f"Too many additionalDirectories ({len(raw)}); at most "
            f"{DEFAULT_MAX_ADDITIONAL_DIRECTORIES} per session"
        )
    roots: list[Path] = []
    for index, entry in enumerate(raw):
        label = f"additionalDirectories[{index}]"
        root = check_root(canonical_directory(entry, workspace, label), label, profile)
        if root != workspace and root not in roots:
            roots.append(root)
    return tuple(roots)


def attach_roots(session: Session, roots: Sequence[Path]) -> None:
    """Make ``roots`` part of the session's jail."""
    if roots:
        session.policy.jail.add_roots(roots)
        logger.info("session %s: extra roots %s", session.session_id, ", ".join(map(str, roots)))


async def store_roots(
    store: AsyncSessionStore | None, session_id: str, roots: Sequence[Path]
) -> None:
    """Store the session's extra roots (replacing the stored ones).

    Raises:
        OperationFailed: the store could not write them.
    """
    if store is None:
        return
    try:
        await store.set_additional_dirs(session_id, [str(root) for root in roots])
    except Exception as exc:
        raise OperationFailed("Failed to persist session") from exc


async def restored_roots(
    store: AsyncSessionStore,
    session_id: str,
    requested: Sequence[str] | None,
    workspace: Path,
    profile: RiskProfileConfig,
) -> tuple[Path, ...]:
    """The extra roots of a restored session: the ones the restore sends (stored in place
    of the old list), else the stored ones, re-checked (a stored root that is gone now is
    left out, with a warning). The stored cwd is checked too.

    Raises:
        InvalidParamsError: the stored cwd may not be a root; a requested entry is not a
            usable directory or may not be one; a stored entry may not be one (the client
            replaces the stored list by sending ``additionalDirectories``).
        OperationFailed: the store could not read or write them.
    """
    check_root(workspace, "cwd", profile, f"session {session_id}: the stored ")
    if requested is not None:
        roots = canonical_roots(requested, workspace, profile)
        await store_roots(store, session_id, roots)
        return roots
    try:
        stored = await store.additional_dirs(session_id)
    except Exception as exc:
        raise OperationFailed("Failed to load session") from exc
    kept: list[Path] = []
    for index, entry in enumerate(stored):
        label = f"additionalDirectories[{index}]"
        try:
            root = canonical_directory(entry, workspace, label)
        except InvalidParamsError as exc:
            logger.warning("session %s: stored extra root left out: %s", session_id, exc)
            continue
        check_root(root, label, profile, _stored(session_id))
        if root != workspace and root not in kept:
            kept.append(root)
    return tuple(kept)


def _stored(session_id: str) -> str:
    return (
        f"session {session_id} cannot be restored with its stored roots (send "
        "additionalDirectories to replace them): the stored "
    )
