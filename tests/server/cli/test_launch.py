"""`zeroclaw acp` read without click (acp_server/cli/launch.py) means what click reads.

The plain reading is taken only when it is certain to match: whatever it accepts, the click
group must read to the same arguments; anything else goes to click, whose help and errors
a user then sees.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from acp_server.cli import main as cli_main
from acp_server.cli.launch import AcpLaunch, CliState, plain_acp_launch
from tests.meta.fresh_interpreter import modules_loaded_by

TOKENS = (
    "acp", "init", "--config-dir", "--max-sessions", "--session-timeout", "--agent",
    "--config-dir=conf", "--max-sessions=", "--agent=", "--agent=-x", "--help", "-h",
    "--version", "--", "--max", "3", "07", "0", "-1", "+4", " 5", "5_0", "\u0661", "x", "",
)  # fmt: skip


def click_reading(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> AcpLaunch | None:
    """What the click group hands ``zeroclaw acp`` for ``argv`` (None: it did not run)."""
    seen: list[AcpLaunch] = []

    def record(state: CliState, launch: AcpLaunch) -> None:
        seen.append(AcpLaunch(state.config_dir_flag, *_values(launch)))

    monkeypatch.setattr(cli_main, "serve_acp", record)
    CliRunner().invoke(cli_main.cli, argv)
    return seen[0] if seen else None


def _values(launch: AcpLaunch) -> tuple[int | None, int | None, str | None]:
    return launch.max_sessions, launch.session_timeout, launch.agent


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["acp"], AcpLaunch()),
        (
            ["--config-dir", "conf", "acp", "--max-sessions", "3", "--agent=coder"],
            AcpLaunch(Path("conf"), 3, None, "coder"),
        ),
        (
            ["--config-dir=conf", "acp", "--session-timeout=07", "--max-sessions=12"],
            AcpLaunch(Path("conf"), 12, 7, None),
        ),
    ],
)
def test_a_plain_acp_start_is_read_as_click_reads_it(
    argv: list[str], expected: AcpLaunch, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert plain_acp_launch(argv) == expected
    assert click_reading(argv, monkeypatch) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["acp", "--help"],
        ["--help"],
        ["--version"],
        ["init"],
        ["acp", "--max-sessions", "0"],  # click explains the range
        ["acp", "--max-sessions", "+4"],
        ["acp", "--session-timeout"],
        ["acp", "--agent", "a", "--agent", "b"],  # click: the last wins; left to it
        ["acp", "--agent="],
        ["acp", "extra"],
        ["--", "acp"],
    ],
)
def test_anything_else_is_left_to_click(argv: list[str]) -> None:
    assert plain_acp_launch(argv) is None


def test_a_config_dir_that_is_a_file_is_left_to_click(tmp_path: Path) -> None:
    a_file = tmp_path / "config.toml"
    a_file.write_text("")
    assert plain_acp_launch(["--config-dir", str(a_file), "acp"]) is None
    assert plain_acp_launch(["--config-dir", str(tmp_path), "acp"]) == AcpLaunch(tmp_path)


@given(st.lists(st.sampled_from(TOKENS), max_size=7))
def test_whatever_the_plain_reading_accepts_click_reads_the_same(argv: list[str]) -> None:
    plain = plain_acp_launch(argv)
    if plain is None:
        return
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert click_reading(argv, monkeypatch) == plain


def test_the_first_model_call_loads_httpx_without_its_command_line() -> None:
    """httpx's CLI module (click, rich, pygments) is skipped once the script has started."""
    skipped = "from acp_server.cli.launch import skip_httpx_cli; skip_httpx_cli(); import httpx"
    assert modules_loaded_by(skipped, ("click", "rich", "pygments")) == []


def test_a_plain_acp_start_runs_without_the_collector_and_gives_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The start's imports run with the collector off (cli/launch.py, ``main``); whatever
    happens to the server, the process has it back afterwards."""
    import gc

    from acp_server.cli import launch

    during: list[bool] = []

    def record(state: CliState, plain: AcpLaunch) -> None:
        during.append(gc.isenabled())
        raise RuntimeError("stop here")

    monkeypatch.setattr(launch, "serve_acp", record)
    monkeypatch.setattr(launch, "configure_logging", lambda: None)
    monkeypatch.setattr("sys.argv", ["zeroclaw", "acp"])
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="stop here"):
        launch.main()
    assert during == [False]
    assert gc.isenabled()
