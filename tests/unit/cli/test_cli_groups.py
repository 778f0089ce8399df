"""`riverlog consume --group`, `riverlog groups list | describe | reset-offsets | delete` and the
AdminClient group calls under them, run end to end against the SDK's fake gateway with the fake
coordinator's group RPCs (`tests/unit/client/group_fakes.py`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "client"))

from client_fakes import FakeServer
from group_fakes import AdminGroupGateway

from riverlog.cli.main import main
from riverlog.client import AdminClient, OffsetAndMetadata, Producer, TopicPartition
from riverlog.common.errors import ErrorCode, RiverlogError

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer(AdminGroupGateway())
    fake.gateway.create("t", 2)
    with Producer(bootstrap_servers=fake.address, linger_ms=0) as p:
        for i in range(10):
            p.send("t", b"v%d" % i, partition=i % 2)
    try:
        yield fake
    finally:
        fake.stop()


def run(server: FakeServer, *argv: str) -> int:
    return main([*argv, "--bootstrap", server.address])


def test_consume_with_group_prints_values_reports_assignments_and_commits(
    server: FakeServer, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    args = ("consume", "t", "--group", "g", "--from-beginning", "--timeout-ms", "1500")
    assert run(server, *args, "--max-messages", "7") == 0
    out, err = capsysbinary.readouterr()
    assert len(out.splitlines()) == 7 and all(v.startswith(b"v") for v in out.splitlines())
    assert b"Assigned partitions: t-0, t-1" in err
    assert b"Revoked partitions: t-0, t-1" in err
    assert b"Processed a total of 7 messages" in err
    group = server.gateway.group  # type: ignore[attr-defined]
    assert sum(o for o, _ in group.offsets.values()) == 7  # exactly what was printed
    assert group.count("leave") == 1 and not group.members
    assert run(server, *args) == 0  # the rest, from the committed offsets
    out, _ = capsysbinary.readouterr()
    assert len(out.splitlines()) == 3
    assert {tp: o for tp, (o, _) in group.offsets.items()} == {TP0: 5, TP1: 5}


def test_group_options_conflict(server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(server, "consume", "t", "--group", "g", "--partition", "0") == 2
    assert "--partition cannot be used with --group" in capsys.readouterr().err


def test_groups_list_describe_reset_delete(
    server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with AdminClient(bootstrap_servers=server.address) as admin:
        admin.alter_group_offsets("g", {TP0: 2, TP1: OffsetAndMetadata(4, "m")})
        assert admin.list_group_offsets("g") == {
            TP0: OffsetAndMetadata(2, "", -1),
            TP1: OffsetAndMetadata(4, "m", -1),
        }
    assert run(server, "groups", "list") == 0
    listing = capsys.readouterr().out
    assert "GROUP" in listing and "g  " in listing and "Empty" in listing

    assert run(server, "groups", "describe", "g", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["state"] == "Empty" and doc["members"] == []
    lags = {
        (r["partition"], r["current_offset"], r["log_end_offset"], r["lag"])
        for r in doc["partitions"]
    }
    assert lags == {(0, 2, 5, 3), (1, 4, 5, 1)}
    assert run(server, "groups", "describe", "g") == 0
    text = capsys.readouterr().out
    assert "State: Empty" in text and "LOG-END-OFFSET" in text

    assert run(server, "groups", "reset-offsets", "g", "--topic", "t", "--shift-by", "-3") == 0
    captured = capsys.readouterr()
    assert "dry run" in captured.err
    group = server.gateway.group  # type: ignore[attr-defined]
    assert group.offsets[TP0] == (2, "")  # unchanged
    assert (
        run(server, "groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute")
        == 0
    )
    capsys.readouterr()
    assert {tp: o for tp, (o, _) in group.offsets.items()} == {TP0: 0, TP1: 0}
    assert (
        run(
            server,
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "t",
            "--to-latest",
            "--execute",
            "--json",
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert [p["new_offset"] for p in plan["partitions"]] == [5, 5] and plan["executed"]

    assert run(server, "groups", "delete", "g") == 0
    assert "was successful" in capsys.readouterr().out
    assert run(server, "groups", "describe", "g") == 1
    assert "does not exist" in capsys.readouterr().err


def test_reset_refuses_active_groups_and_delete_refuses_non_empty(
    server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from riverlog.client import Consumer

    with Consumer(
        bootstrap_servers=server.address, group_id="g", auto_offset_reset="earliest"
    ) as c:
        c.subscribe(["t"])
        for _ in range(20):
            c.poll(timeout_ms=50)
            if c.assignment():
                break
        assert run(server, "groups", "reset-offsets", "g", "--topic", "t", "--to-earliest") == 1
        assert "Stable" in capsys.readouterr().err
        assert run(server, "groups", "describe", "g", "--json") == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["state"] == "Stable" and doc["protocol"] == "range"
        assert doc["members"][0]["assignment"] == ["t-0", "t-1"]
        with AdminClient(bootstrap_servers=server.address) as admin:
            with pytest.raises(RiverlogError) as failure:
                admin.delete_groups(["g"])
            assert failure.value.code == ErrorCode.NON_EMPTY_GROUP
