"""Token precedence, the cached token file, and pairing (HTTP replaced by fakes)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from acp_bridge import auth
from acp_bridge.auth import (
    NO_TOKEN_MESSAGE,
    Credentials,
    PairingStatus,
    TokenSource,
    read_token_file,
    resolve_credentials,
    write_token_file,
)
from acp_bridge.errors import BridgeExit, ExitCode
from acp_core.gateway_contract import ADMIN_SECRET_FILE

BASE = "http://127.0.0.1:1"


class FakePairing:
    """Stands in for the two HTTP calls and records them."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        *,
        code: str | None = "123456",
        required: bool | None = True,
    ) -> None:
        self.status = PairingStatus(required, code)
        self.calls: list[tuple[str, ...]] = []
        self.admin_secrets: list[str | None] = []
        self.principals: list[str | None] = []
        monkeypatch.setattr(auth, "fetch_pairing_code", self.fetch)
        monkeypatch.setattr(auth, "pair", self.pair)

    def fetch(self, http_base: str, admin_secret: str | None = None) -> PairingStatus:
        self.calls.append(("fetch", http_base))
        self.admin_secrets.append(admin_secret)
        return self.status

    def pair(self, http_base: str, code: str, principal: str | None = None) -> str:
        self.calls.append(("pair", http_base, code))
        self.principals.append(principal)
        return f"token-for-{code}"


async def resolve(
    config_dir: Path,
    environ: dict[str, str] | None = None,
    *,
    pair_code: str | None = None,
    require_pairing: bool = True,
    http_base: str = BASE,
) -> Credentials:
    return await resolve_credentials(
        require_pairing=require_pairing,
        config_dir=config_dir,
        http_base=http_base,
        pair_code=pair_code,
        environ=environ or {},
    )


def cache(config_dir: Path, token: str, mode: int = 0o600) -> Path:
    path = config_dir / "acp-bridge-token"
    path.write_text(token)
    path.chmod(mode)
    return path


class TestPrecedence:
    async def test_nothing_is_sent_when_pairing_is_not_required(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch)
        cache(tmp_path, "file")
        creds = await resolve(
            tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "env"}, pair_code="1", require_pairing=False
        )
        assert creds == Credentials(TokenSource.NOT_REQUIRED)
        assert creds.headers == {}
        assert pairing.calls == []

    async def test_env_first(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        pairing = FakePairing(monkeypatch)
        cache(tmp_path, "file")
        creds = await resolve(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "  env\n"})
        assert (creds.source, creds.token) == (TokenSource.ENV, "env")
        assert creds.headers == {"Authorization": "Bearer env"}
        assert pairing.calls == []

    async def test_blank_env_falls_through_to_the_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        FakePairing(monkeypatch)
        path = cache(tmp_path, " file-token \n")
        creds = await resolve(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "  "})
        assert (creds.source, creds.token, creds.token_file) == (
            TokenSource.FILE,
            "file-token",
            path,
        )

    async def test_file_beats_a_pair_code_with_a_warning(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        pairing = FakePairing(monkeypatch)
        cache(tmp_path, "file-token")
        creds = await resolve(tmp_path, pair_code="999")
        assert creds.source is TokenSource.FILE
        assert pairing.calls == []
        assert "--pair-code ignored" in caplog.text

    async def test_empty_file_falls_through_to_pairing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch)
        cache(tmp_path, "\n")
        creds = await resolve(tmp_path)
        assert (creds.source, creds.token) == (TokenSource.PAIRING, "token-for-123456")
        assert pairing.calls == [("fetch", BASE), ("pair", BASE, "123456")]

    async def test_flag_code_beats_env_code_and_skips_the_code_endpoint(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch)
        creds = await resolve(tmp_path, {"ZEROCLAW_ACP_PAIRING_CODE": "222"}, pair_code=" 111 ")
        assert creds.token == "token-for-111"
        assert pairing.calls == [("pair", BASE, "111")]

    async def test_pairing_names_the_principal_by_default_after_the_host(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch)
        monkeypatch.setattr(socket, "gethostname", lambda: "dev-box.corp.example")
        await resolve(tmp_path, pair_code="111")
        named = await auth.resolve_credentials(
            require_pairing=True,
            config_dir=tmp_path / "other",
            http_base=BASE,
            pair_code="222",
            environ={},
            principal="alice",
        )
        assert named.token == "token-for-222"
        assert pairing.principals == ["dev-box", "alice"]

    async def test_env_code_skips_the_code_endpoint(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch)
        creds = await resolve(tmp_path, {"ZEROCLAW_ACP_PAIRING_CODE": "222"})
        assert creds.token == "token-for-222"
        assert pairing.calls == [("pair", BASE, "222")]

    async def test_paired_token_is_cached_0600(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        FakePairing(monkeypatch)
        config_dir = tmp_path / "new" / "dir"
        creds = await resolve(config_dir)
        path = config_dir / "acp-bridge-token"
        assert creds.token_file == path
        assert path.read_text() == "token-for-123456\n"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        # Next time the cache is used and no pairing happens.
        assert (await resolve(config_dir)).source is TokenSource.FILE

    async def test_gateway_saying_no_pairing_needed_means_no_token(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch, code=None, required=False)
        assert (await resolve(tmp_path)).source is TokenSource.NOT_REQUIRED
        assert pairing.calls == [("fetch", BASE)]

    async def test_no_code_anywhere_is_zeroclaw_message(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        FakePairing(monkeypatch, code=None)
        with pytest.raises(BridgeExit) as caught:
            await resolve(tmp_path)
        assert (caught.value.code, caught.value.message) == (ExitCode.USAGE, NO_TOKEN_MESSAGE)

    async def test_the_local_gateways_admin_secret_proves_the_operator(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch)
        (tmp_path / ADMIN_SECRET_FILE).write_text("the-operators-secret\n")
        await resolve(tmp_path)
        assert pairing.admin_secrets == ["the-operators-secret"]

    @pytest.mark.parametrize("base", ["http://gateway.example:42617", "https://203.0.113.7:1"])
    async def test_the_admin_secret_never_goes_to_another_machine(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: str
    ) -> None:
        pairing = FakePairing(monkeypatch)
        (tmp_path / ADMIN_SECRET_FILE).write_text("the-operators-secret\n")
        await resolve(tmp_path, http_base=base)
        assert pairing.admin_secrets == [None]

    async def test_without_a_readable_admin_secret_none_is_sent(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pairing = FakePairing(monkeypatch)
        await resolve(tmp_path)
        assert pairing.admin_secrets == [None]


class TestTokenFile:
    def test_missing_is_none(self, tmp_path: Path) -> None:
        assert read_token_file(tmp_path / "acp-bridge-token") is None

    @pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o700 | 0o004])
    def test_group_or_other_access_is_refused(self, tmp_path: Path, mode: int) -> None:
        path = cache(tmp_path, "secret", mode)
        with pytest.raises(BridgeExit) as caught:
            read_token_file(path)
        assert caught.value.code is ExitCode.USAGE
        assert f"chmod 600 {path}" in caught.value.message
        assert "secret" not in caught.value.message

    @pytest.mark.parametrize("mode", [0o600, 0o400])
    def test_owner_only_is_accepted(self, tmp_path: Path, mode: int) -> None:
        assert read_token_file(cache(tmp_path, "tok\n", mode)) == "tok"

    def test_a_directory_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "acp-bridge-token").mkdir(mode=0o700)
        with pytest.raises(BridgeExit) as caught:
            read_token_file(tmp_path / "acp-bridge-token")
        assert caught.value.code is ExitCode.USAGE

    def test_oversized_file_is_refused(self, tmp_path: Path) -> None:
        path = cache(tmp_path, "x" * 5000)
        with pytest.raises(BridgeExit, match="not a token"):
            read_token_file(path)

    def test_write_replaces_atomically_with_mode_0600(self, tmp_path: Path) -> None:
        path = cache(tmp_path, "old", 0o644)
        old_umask = os.umask(0)
        try:
            write_token_file(path, "new")
        finally:
            os.umask(old_umask)
        assert path.read_text() == "new\n"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert [p.name for p in tmp_path.iterdir()] == ["acp-bridge-token"]


class TestCredentials:
    def test_repr_never_shows_the_token(self) -> None:
        creds = Credentials(TokenSource.ENV, "s3cret")
        assert "s3cret" not in repr(creds)

    @pytest.mark.parametrize(
        ("source", "advice"),
        [
            (TokenSource.ENV, "Fix or unset ZEROCLAW_ACP_BRIDGE_TOKEN"),
            (TokenSource.FILE, "Delete that file"),
            (TokenSource.PAIRING, "another gateway"),
            (TokenSource.NOT_REQUIRED, "require_pairing is false"),
        ],
    )
    def test_rejection_advice_depends_on_the_source(self, source: TokenSource, advice: str) -> None:
        creds = Credentials(source, "t", token_file=Path("/cfg/acp-bridge-token"))
        assert advice in creds.rejected_advice()
