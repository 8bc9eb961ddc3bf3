"""Pairing: one-time codes exchanged for bearer tokens, and persisting token digests.

``PairingGuard`` holds the pairing state behind ``GET /pair/code``, ``POST /pair`` and the
admin endpoint in this process and applies the rules of security/pairing.py to it (a 6-digit
one-time code, wrong codes → 403, five failures → a lockout answered with 429 and
``retry_after``, a per-minute cap on attempts). It reads time from an injected clock, so
tests drive it without sleeping.

``persist_paired_tokens`` rewrites ``[gateway] paired_tokens`` in ``config.toml``: the file is
edited in place with tomlkit, so only that key's value changes and every comment, blank line
and the order of keys stay as the admin wrote them; the result is checked with tomllib
(every other setting unchanged) and written to a temporary file in the same directory which
then replaces the original (atomic on POSIX).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import tomlkit
import tomlkit.exceptions
from tomlkit.items import InlineTable, Table

from acp_core.gateway_contract import TOKEN_RANDOM_BYTES, format_token
from acp_server.errors import ZeroclawError
from acp_server.security.pairing import (
    DEFAULT_MAX_PAIR_FAILURES,
    DEFAULT_PAIR_LOCKOUT_SECS,
    PairingLimits,
    PairingState,
    PairOutcome,
    decide_attempt,
    with_fresh_code,
)

DEFAULT_MAX_CONFIG_REWRITE_BYTES: Final = 4 * 1024 * 1024
"""A config.toml larger than this is not rewritten (it is hand-written TOML, not data)."""


def generate_token() -> str:
    """A bearer token ``zc_<64 hex>`` (256 bits from the OS CSPRNG)."""
    return format_token(secrets.token_hex(TOKEN_RANDOM_BYTES))


class PairingGuard:
    """The one-time code and the brute-force limits around it, in this process.

    Limits are global rather than per client address: a 6-digit code must not be guessable
    by spreading attempts over many addresses. A legitimate user who got locked out asks the
    operator for a fresh code (``zeroclaw gateway get-paircode --new``), which lifts the lockout.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        rate_limit_per_minute: int,
        max_failures: int = DEFAULT_MAX_PAIR_FAILURES,
        lockout_secs: float = DEFAULT_PAIR_LOCKOUT_SECS,
    ) -> None:
        self._clock = clock
        self.limits = PairingLimits(rate_limit_per_minute, max_failures, lockout_secs)
        self._state = PairingState()

    @property
    def code(self) -> str | None:
        """The active one-time code, or None once it was used (or none was issued)."""
        return self._state.code

    @property
    def discoverable_code(self) -> str | None:
        """The active code when it may be handed out without the admin secret, else None.

        Only the code issued at start-up is discoverable (``GET /pair/code``); a code the
        operator issued (``get-paircode --new`` or ``--rotate``) is shown only through the
        admin routes, so revoking every token never hands the next code to whoever asks first.
        """
        return self._state.code if self._state.discoverable else None

    def issue_code(self, *, discoverable: bool = True) -> str:
        """A fresh code replaces any previous one and lifts a lockout; ``discoverable``
        says whether ``GET /pair/code`` may show it (see ``discoverable_code``)."""
        self._state = with_fresh_code(self._state, discoverable=discoverable)
        assert self._state.code is not None
        return self._state.code

    def snapshot(self) -> PairingState:
        """The state now, for ``restore`` (a pairing undone after its code was accepted)."""
        return self._state

    def restore(self, state: PairingState) -> None:
        """Put back the code ``state`` held (the attempts since stay counted)."""
        self._state = replace(self._state, code=state.code, discoverable=state.discoverable)

    def withdraw_code(self) -> None:
        self._state = replace(self._state, code=None, discoverable=False)

    def attempt(self, presented: str | None) -> PairOutcome:
        """Check one ``POST /pair``; a success consumes the code."""
        self._state, outcome = decide_attempt(
            self._state, presented, now=self._clock(), limits=self.limits
        )
        return outcome


class ConfigRewriteError(ZeroclawError):
    """``config.toml`` could not be read or rewritten; the message says why."""


def persist_paired_tokens(config_file: Path, digests: Sequence[str]) -> None:
    """Set ``[gateway] paired_tokens`` in ``config_file`` to ``digests``, keeping every other
    setting, by writing a sibling temporary file and renaming it over the original.

    Blocking: call through ``trio.to_thread.run_sync``.

    Raises:
        ConfigRewriteError: the file is missing, too large, not TOML, or cannot be written.
    """
    # A config.toml kept in a dotfiles repository is often a symlink: rewrite the file it
    # points to, or the rename would replace the link with a detached copy.
    config_file = Path(os.path.realpath(config_file))
    try:
        with config_file.open("rb") as handle:
            raw = handle.read(DEFAULT_MAX_CONFIG_REWRITE_BYTES + 1)
        mode = stat.S_IMODE(os.stat(config_file).st_mode)
    except OSError as exc:
        raise ConfigRewriteError(f"cannot read {config_file}: {exc.strerror or exc}") from None
    if len(raw) > DEFAULT_MAX_CONFIG_REWRITE_BYTES:
        raise ConfigRewriteError(
            f"{config_file} is larger than {DEFAULT_MAX_CONFIG_REWRITE_BYTES} bytes"
        )
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    encoded = _with_paired_tokens(config_file, raw, digests)
    directory = config_file.parent
    fd, temp_name = tempfile.mkstemp(prefix=".config.toml.", suffix=".tmp", dir=directory)
    temp_path = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(encoded)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_path, mode)
        os.replace(temp_path, config_file)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp_path.unlink()
        raise ConfigRewriteError(f"cannot write {config_file}: {exc.strerror or exc}") from None
    # Make the rename itself durable.
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _with_paired_tokens(config_file: Path, raw: bytes, digests: Sequence[str]) -> bytes:
    """``raw`` (config.toml's bytes) with ``[gateway] paired_tokens`` set to ``digests``,
    comments and layout kept.

    Raises:
        ConfigRewriteError: the file is not TOML, ``gateway`` is not a table, or the edit
            would change any other setting.
    """
    try:
        text = raw.decode("utf-8")
        before: dict[str, Any] = tomllib.loads(text)
        document = tomlkit.parse(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, tomlkit.exceptions.ParseError) as exc:
        raise ConfigRewriteError(f"{config_file} is not valid TOML: {exc}") from None
    gateway = document.get("gateway")
    if gateway is None:
        gateway = tomlkit.table()
        document.add("gateway", gateway)
    if not isinstance(gateway, Table | InlineTable):
        raise ConfigRewriteError(f"{config_file}: `gateway` is not a table")
    value = tomlkit.array()
    value.extend(digests)
    value.multiline(len(digests) > 1 and isinstance(gateway, Table))
    gateway["paired_tokens"] = value
    encoded = tomlkit.dumps(document)
    expected = dict(before)
    expected["gateway"] = {**before.get("gateway", {}), "paired_tokens": list(digests)}
    try:
        after = tomllib.loads(encoded)
    except tomllib.TOMLDecodeError:
        after = None
    if after != expected:
        raise ConfigRewriteError(
            f"{config_file}: cannot set [gateway] paired_tokens without changing other settings"
        )
    return encoded.encode("utf-8")
