"""Output formatting and error reporting of the `riverlog` command."""

from __future__ import annotations

import json

import grpc
import pytest

from riverlog.cli.console import (
    CliError,
    cell,
    configs_text,
    describe,
    fields,
    report_error,
    table,
    to_json,
)
from riverlog.cluster import ClusterError
from riverlog.common.errors import ErrorCode, RiverlogError


def test_table_aligns_columns_and_shows_empty_values() -> None:
    text = table(("name", "node", "isr"), [("a", 1, [1, 2, 3]), ("longer-name", None, [])])
    lines = text.splitlines()
    assert lines[0].split() == ["NAME", "NODE", "ISR"]
    assert lines[1].split() == ["a", "1", "1,2,3"]
    assert lines[2].split() == ["longer-name", "-", "-"]
    assert lines[1].index("1") == lines[0].index("NODE")  # columns line up


def test_cells() -> None:
    assert cell(True) == "yes" and cell(False) == "no"
    assert cell(None) == "-"
    assert cell((3, 1)) == "3,1"


def test_kafka_style_fields_and_configs() -> None:
    assert fields({"Topic": "t", "Partition": 0, "Isr": [1, 2]}, "\t") == (
        "\tTopic: t\tPartition: 0\tIsr: 1,2"
    )
    assert configs_text({"segment.bytes": "1", "cleanup.policy": "compact"}) == (
        "cleanup.policy=compact,segment.bytes=1"
    )


def test_json_is_one_parseable_document() -> None:
    assert json.loads(to_json({"a": [1, None], "b": {"c": True}})) == {
        "a": [1, None],
        "b": {"c": True},
    }


class FakeRpcError(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection refused"

    def trailing_metadata(self) -> tuple[()]:
        return ()


@pytest.mark.parametrize(
    ("error", "message", "status"),
    [
        (CliError("bad input", 2), "bad input", 2),
        (
            RiverlogError("topic 'x' does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            "UNKNOWN_TOPIC_OR_PARTITION: topic 'x' does not exist",
            1,
        ),
        (FakeRpcError(), "NETWORK_EXCEPTION: UNAVAILABLE: connection refused", 1),
        (ClusterError("cluster not ready"), "cluster not ready", 1),
        (FileNotFoundError(2, "No such file or directory", "/x.log"), "cannot open /x.log", 1),
        (ValueError("linger.ms: expected an integer"), "linger.ms: expected an integer", 1),
        (KeyError("boom"), "internal error: KeyError", 1),
    ],
)
def test_every_error_becomes_one_line(error: BaseException, message: str, status: int) -> None:
    text, code = describe(error)
    assert text.startswith(message)
    assert code == status


def test_report_error_prints_one_line_without_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RIVERLOG_DEBUG", raising=False)
    assert report_error(RiverlogError("nope", ErrorCode.INVALID_CONFIG)) == 1
    err = capsys.readouterr().err
    assert err == "riverlog: error: INVALID_CONFIG: nope\n"


def test_debug_shows_the_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIVERLOG_DEBUG", "1")
    try:
        raise KeyError("boom")
    except KeyError as e:
        report_error(e)
    assert "Traceback" in capsys.readouterr().err
