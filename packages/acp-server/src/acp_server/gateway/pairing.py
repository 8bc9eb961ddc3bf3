"""Pairing: one-time codes exchanged for bearer tokens, and persisting token digests.

``PairingGuard`` is the state machine behind ``GET /pair/code``, ``POST /pair`` and the admin
endpoint, as the reference server has it: a 6-digit one-time code, wrong codes → 403, five
failures → a lockout answered with 429 and ``retry_after``, and a per-minute cap on attempts.
It reads time from an injected clock, so tests drive it without sleeping.

``persist_paired_tokens`` rewrites ``[gateway] paired_tokens`` in ``config.toml``: the file is
edited in place with tomlkit, so only that key's value changes and every comment, blank line
and the order of keys stay as the admin wrote them; the result is checked with tomllib
(every other setting unchanged) and written to a temporary file in the same directory which
then replaces the original (atomic on POSIX).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import tomlkit
import tomlkit.exceptions
from tomlkit.items import InlineTable, Table

from acp_core.gateway_contract import TOKEN_RANDOM_BYTES, format_token
from acp_server.errors import ZeroclawError

PAIRING_CODE_DIGITS: Final = 6
DEFAULT_MAX_PAIR_FAILURES: Final = 5
"""Wrong codes in a row before the lockout (the reference's figure)."""
DEFAULT_PAIR_LOCKOUT_SECS: Final = 300.0
RATE_WINDOW_SECS: Final = 60.0
DEFAULT_MAX_CONFIG_REWRITE_BYTES: Final = 4 * 1024 * 1024
"""A config.toml larger than this is not rewritten (it is hand-written TOML, not data)."""


def generate_pairing_code() -> str:
    """A uniformly random 6-digit code (leading zeros kept)."""
    return f"{secrets.randbelow(10**PAIRING_CODE_DIGITS):0{PAIRING_CODE_DIGITS}d}"


def generate_token() -> str:
    """A bearer token ``zc_<64 hex>`` (256 bits from the OS CSPRNG)."""
    return format_token(secrets.token_hex(TOKEN_RANDOM_BYTES))


@dataclass(frozen=True, slots=True)
class PairAccepted:
    pass


@dataclass(frozen=True, slots=True)
class PairRejected:
    """``status`` is 400 (no code given), 403 (wrong or no active code) or 429 (throttled)."""

    status: int
    error: str
    retry_after: int | None = None


PairOutcome = PairAccepted | PairRejected


@dataclass(frozen=True, slots=True)
class PairingLimits:
    """How hard guessing is made: attempts per minute, wrong codes before the lockout."""

    rate_limit_per_minute: int
    max_failures: int = DEFAULT_MAX_PAIR_FAILURES
    lockout_secs: float = DEFAULT_PAIR_LOCKOUT_SECS

    @property
    def per_minute(self) -> int:
        return max(1, self.rate_limit_per_minute)


@dataclass(frozen=True, slots=True)
class PairingState:
    """The one-time code and the brute-force counters around it, as a value: one gateway
    keeps it in a ``PairingGuard``, replicas sharing a PostgreSQL store keep it in one row
    (storage/pg_tokens.py). ``attempts`` holds the attempt times of the last minute."""

    code: str | None = None
    discoverable: bool = False
    failures: int = 0
    locked_until: float | None = None
    attempts: tuple[float, ...] = ()


def with_fresh_code(state: PairingState, *, discoverable: bool) -> PairingState:
    """``state`` with a new code in place of any previous one and no lockout."""
    return replace(
        state,
        code=generate_pairing_code(),
        discoverable=discoverable,
        failures=0,
        locked_until=None,
    )


def decide_attempt(
    state: PairingState, presented: str | None, *, now: float, limits: PairingLimits
) -> tuple[PairingState, PairOutcome]:
    """One ``POST /pair`` against ``state`` at time ``now``: the state after it, and the
    answer. A success consumes the code."""
    per_minute = limits.per_minute
    attempts = tuple(at for at in state.attempts if now - at < RATE_WINDOW_SECS)
    if len(attempts) >= per_minute:
        wait = RATE_WINDOW_SECS - (now - attempts[0])
        return replace(state, attempts=attempts), PairRejected(
            429,
            f"Too many pairing attempts; the limit is {per_minute} per minute",
            retry_after=_whole_seconds(wait),
        )
    state = replace(state, attempts=(*attempts, now)[-per_minute:])
    if state.locked_until is not None:
        if now < state.locked_until:
            return state, PairRejected(
                429,
                "Too many wrong pairing codes; try again later or ask the operator for a "
                "new code (zeroclaw gateway get-paircode --new)",
                retry_after=_whole_seconds(state.locked_until - now),
            )
        state = replace(state, locked_until=None, failures=0)
    if presented is None or not presented.strip():
        return state, PairRejected(400, "Missing X-Pairing-Code header")
    if state.code is None or not hmac.compare_digest(
        presented.strip().encode("utf-8"), state.code.encode("ascii")
    ):
        failures = state.failures + 1
        if failures >= limits.max_failures:
            return replace(
                state, failures=failures, locked_until=now + limits.lockout_secs
            ), PairRejected(
                429,
                f"Too many wrong pairing codes; locked for {int(limits.lockout_secs)} seconds",
                retry_after=_whole_seconds(limits.lockout_secs),
            )
        return replace(state, failures=failures), PairRejected(403, "Invalid pairing code")
    return replace(state, code=None, discoverable=False, failures=0), PairAccepted()


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

    def withdraw_code(self) -> None:
        self._state = replace(self._state, code=None, discoverable=False)

    def attempt(self, presented: str | None) -> PairOutcome:
        """Check one ``POST /pair``; a success consumes the code."""
        self._state, outcome = decide_attempt(
            self._state, presented, now=self._clock(), limits=self.limits
        )
        return outcome


def _whole_seconds(seconds: float) -> int:
    return max(1, int(seconds + 0.999))


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
