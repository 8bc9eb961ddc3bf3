"""Flag parsing, exit codes and log redaction of the bridge's command line."""

from __future__ import annotations

import errno
import logging

import pytest

from acp_bridge.cli import _bridge_exit_in, _RedactingFormatter, build_parser
from acp_bridge.errors import BridgeExit, ExitCode, describe_error
from acp_bridge.inflight import InFlightTable
from acp_bridge.reconnect_policy import (
    RECONNECT_FIRST_DELAY_SECS,
    RECONNECT_MAX_DELAY_SECS,
    backoff,
)


def test_exit_codes_are_the_documented_ones() -> None:
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3]
    help_text = build_parser().format_help()
    for line in ("0  normal end", "1  could not connect", "2  usage", "3  the gateway rejected"):
        assert line in help_text


@pytest.mark.parametrize("argv", [["--config-dir", "/tmp/zc"], ["--config-dir=/tmp/zc"]])
def test_config_dir_in_both_spellings(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).config_dir == "/tmp/zc"


def test_defaults() -> None:
    args = build_parser().parse_args([])
    assert (args.config_dir, args.url, args.agent, args.pair_code, args.check) == (
        None,
        None,
        None,
        None,
        False,
    )
    assert (args.eof_grace, args.log_level, args.log_file) == (10.0, "warning", None)


def test_all_flags() -> None:
    args = build_parser().parse_args(
        [
            "--url=ws://h:1/acp",
            "--agent",
            "coder",
            "--pair-code=123456",
            "--check",
            "--eof-grace",
            "0",
            "--ping-interval",
            "0",
            "--ping-timeout",
            "2.5",
            "--connect-timeout",
            "3",
            "--max-message-bytes",
            "1000",
            "--log-level",
            "debug",
            "--log-file",
            "/tmp/x.log",
        ]
    )
    assert args.url == "ws://h:1/acp"
    assert (args.agent, args.pair_code, args.check) == ("coder", "123456", True)
    assert (args.eof_grace, args.ping_interval, args.ping_timeout) == (0.0, 0.0, 2.5)
    assert (args.connect_timeout, args.max_message_bytes) == (3.0, 1000)
    assert (args.log_level, args.log_file) == ("debug", "/tmp/x.log")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config-dir"], "--config-dir requires a path value"),
        (["--pair-code"], "--pair-code requires a code value"),
        (["--config-dir", "--check"], "--config-dir requires a path value"),
        (["--eof-grace", "soon"], "expected a number of seconds"),
        (["--ping-timeout", "0"], "expected a positive number"),
        (["--max-message-bytes", "0"], "expected a positive integer"),
        (["--log-level", "loud"], "invalid choice"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(argv)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def test_bridge_exit_is_found_inside_exception_groups() -> None:
    inner = BridgeExit(ExitCode.AUTH, "no")
    assert _bridge_exit_in(inner) is inner
    nested = BaseExceptionGroup("outer", [ExceptionGroup("inner", [inner])])
    assert _bridge_exit_in(nested) is inner
    assert _bridge_exit_in(ExceptionGroup("two", [inner, ValueError()])) is None
    assert _bridge_exit_in(ValueError()) is None


def test_formatter_redacts_secrets_and_prints_fatal_messages_bare() -> None:
    secrets = {"tok-123"}
    formatter = _RedactingFormatter("%(levelname)s %(message)s", secrets)

    def record(level: int, message: str) -> logging.LogRecord:
        return logging.LogRecord("x", level, __file__, 1, message, None, None)

    assert formatter.format(record(logging.DEBUG, "> Authorization: Bearer tok-123")) == (
        "DEBUG > Authorization: Bearer <redacted>"
    )
    assert formatter.format(record(logging.CRITICAL, "ERROR: bad tok-123")) == (
        "ERROR: bad <redacted>"
    )
    secrets.add("later")  # secrets learnt after logging starts are redacted too
    assert formatter.format(record(logging.INFO, "later")) == "INFO <redacted>"


class TestInFlight:
    def test_drain_returns_what_is_owed_in_order(self) -> None:
        inflight = InFlightTable()
        inflight.add(2, "b")
        inflight.add(1, "a")
        assert [(i, owed.method) for i, owed in inflight.drain()] == [(2, "b"), (1, "a")]
        assert len(inflight) == 0

    def test_the_table_is_bounded(self) -> None:
        inflight = InFlightTable(limit=2)
        for request_id in range(3):
            inflight.add(request_id, "m")
        assert [request_id for request_id, _ in inflight.drain()] == [1, 2]


def test_reconnect_flags() -> None:
    args = build_parser().parse_args([])
    assert (args.reconnect, args.reconnect_max_secs) == (True, 60.0)
    args = build_parser().parse_args(["--no-reconnect", "--reconnect-max-secs", "5"])
    assert (args.reconnect, args.reconnect_max_secs) == (False, 5.0)


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    for attempt in range(20):
        delay = backoff(attempt)
        nominal = min(RECONNECT_MAX_DELAY_SECS, RECONNECT_FIRST_DELAY_SECS * 2**attempt)
        assert nominal / 2 <= delay <= nominal
    assert len({backoff(3) for _ in range(20)}) > 1  # jittered: bridges do not stampede


def test_errors_are_described_in_a_few_words() -> None:
    refused = ConnectionRefusedError(
        errno.ECONNREFUSED, "Error connecting to x: Connection refused"
    )
    wrapper = OSError("all attempts to connect to 127.0.0.1:1 failed")
    wrapper.__cause__ = ExceptionGroup("all attempts", [refused])
    assert describe_error(wrapper) == "connection refused"
    assert describe_error(refused) == "connection refused"
    assert describe_error(TimeoutError()) == "timed out"
    assert describe_error(ValueError("odd")) == "odd"
