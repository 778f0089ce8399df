"""Argument parsing of every `riverlog` command: defaults, Kafka-style options, and usage
errors (exit status 2, one message, no traceback)."""

from __future__ import annotations

import pytest

from riverlog.cli.main import build_parser, main


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_cluster_up_defaults_and_options() -> None:
    args = parse("cluster", "up")
    assert (args.storage_nodes, args.metadata_nodes, args.gateways) == (3, 3, 1)
    assert args.data_dir is None and args.etcd is None and not args.clean
    args = parse(
        "cluster", "up", "--data-dir", "/tmp/x", "--storage-nodes", "5", "--metadata-nodes", "1",
        "--gateways", "2", "--etcd", "http://127.0.0.1:2379", "--racks", "a,b",
        "--config", "storage:log.segment.bytes=1024",
    )  # fmt: skip
    assert str(args.data_dir) == "/tmp/x"
    assert (args.storage_nodes, args.metadata_nodes, args.gateways) == (5, 1, 2)
    assert args.config == [("storage", "log.segment.bytes", "1024")]


def test_cluster_status_and_down() -> None:
    assert parse("cluster", "status", "--json").json
    assert parse("cluster", "down", "--grace", "2").grace == 2.0


def test_topics_create() -> None:
    args = parse(
        "topics", "create", "t", "--partitions", "3", "--replication-factor", "2",
        "--config", "retention.ms=1000", "--config", "cleanup.policy=compact",
        "--bootstrap", "127.0.0.1:9092", "--client-id", "me",
    )  # fmt: skip
    assert (args.name, args.partitions, args.replication_factor) == ("t", 3, 2)
    assert dict(args.config) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert (args.bootstrap, args.client_id) == ("127.0.0.1:9092", "me")
    defaults = parse("topics", "create", "t")
    assert (defaults.partitions, defaults.replication_factor) == (-1, -1)
    assert defaults.client_id == "riverlog-cli"


def test_topics_alter_describe_delete_list() -> None:
    alter = parse("topics", "alter", "t", "--config", "a=1", "--delete-config", "b")
    assert alter.config == [("a", "1")] and alter.delete_config == ["b"]
    assert parse("topics", "describe").names == []
    assert parse("topics", "describe", "a", "b", "--json").names == ["a", "b"]
    assert parse("topics", "delete", "t", "--if-exists").if_exists
    assert parse("topics", "list", "--json").json
    # Kafka's spelling of the bootstrap option works too.
    assert parse("topics", "list", "--bootstrap-server", "h:1").bootstrap == "h:1"


def test_produce_options() -> None:
    args = parse("produce", "t", "--key-separator", ":", "--acks", "1", "--compression", "lz4",
                 "--partition", "2", "--producer-property", "batch.size=1000")  # fmt: skip
    assert (args.topic, args.key_separator, args.acks, args.compression) == ("t", ":", "1", "lz4")
    assert args.partition == 2 and args.producer_property == [("batch.size", "1000")]
    assert parse("produce", "t").acks == "all"


def test_consume_options() -> None:
    args = parse("consume", "t", "--offset", "5", "--partition", "1", "--max-messages", "3",
                 "--timeout-ms", "100", "--print-key", "--follow")  # fmt: skip
    assert (args.offset, args.partition, args.max_messages, args.timeout_ms) == (5, 1, 3, 100)
    assert args.print_key and args.follow and args.key_separator == "\t"
    assert parse("consume", "t", "--offset", "earliest", "--partition", "0").offset == "earliest"
    assert parse("consume", "t", "--from-timestamp", "1700000000000").from_timestamp == (
        1_700_000_000_000
    )
    assert parse("consume", "t").isolation_level is None  # the consumer's default
    committed = parse("consume", "t", "--isolation-level", "read_committed")
    assert committed.isolation_level == "read_committed"
    assert parse("groups", "describe", "g").isolation_level == "read_uncommitted"
    args = parse("transactions", "abort", "--transactional-id", "tx", "--fence")
    assert (args.transactional_id, args.fence) == ("tx", True)


def test_dump_log() -> None:
    args = parse("dump-log", "/x/00000000000000000000.log", "--print-records")
    assert [str(p) for p in args.paths] == ["/x/00000000000000000000.log"] and args.print_records
    args = parse("dump-log", "/x/a.log", "/x/a.snapshot")
    assert [p.name for p in args.paths] == ["a.log", "a.snapshot"]


@pytest.mark.parametrize(
    "argv",
    [
        ["consume", "t", "--from-beginning", "--offset", "3"],
        ["consume", "t", "--offset", "-1", "--partition", "0"],
        ["consume", "t", "--offset", "soon", "--partition", "0"],
        ["produce", "t", "--acks", "2"],
        ["produce", "t", "--compression", "brotli"],
        ["topics", "create", "t", "--config", "novalue"],
        ["cluster", "up", "--config", "broker:a=b"],
        ["cluster", "up", "--storage-nodes", "-1"],
        ["topics"],
        ["nonsense"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["consume", "t", "--offset", "3"], "--offset needs --partition"),
        (["consume", "t", "--max-messages", "0"], "--max-messages must be at least 1"),
        (["topics", "alter", "t", "--bootstrap", "127.0.0.1:1"], "nothing to change"),
        (["topics", "list", "--bootstrap", "nohost"], "is not HOST:PORT"),
        (["cluster", "up", "--etcd", "127.0.0.1:2379"], "--etcd expects a URL"),
    ],
)
def test_checked_usage_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("riverlog: error: ")


def test_no_bootstrap_anywhere_is_one_clear_line(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RIVERLOG_BOOTSTRAP", raising=False)
    monkeypatch.setenv("RIVERLOG_HOME", str(tmp_path))
    assert main(["topics", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("riverlog: error: no bootstrap address") and err.count("\n") == 1


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("riverlog ")
