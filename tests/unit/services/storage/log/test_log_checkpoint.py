"""Offset checkpoint files: Kafka's text format, round trips, atomic replacement, and errors
that name the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import (
    CheckpointFile,
    CorruptCheckpointError,
    OffsetCheckpointFile,
)


def test_round_trip_in_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {
        TopicPartition("orders", 1): 987,
        TopicPartition("orders", 0): 1234,
        TopicPartition("my.topic-with-dash", 12): 0,
    }
    OffsetCheckpointFile(path).write(offsets)
    assert path.read_text() == "0\n3\nmy.topic-with-dash 12 0\norders 0 1234\norders 1 987\n"
    assert OffsetCheckpointFile(path).read() == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_file_reads_empty_and_empty_map_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    assert OffsetCheckpointFile(path).read() == {}
    OffsetCheckpointFile(path).write({})
    assert path.read_text() == "0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


def test_rewrite_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    cp = OffsetCheckpointFile(path)
    cp.write({TopicPartition("a", p): p for p in range(100)})
    cp.write({TopicPartition("b", 0): 5})
    assert cp.read() == {TopicPartition("b", 0): 5}


def test_a_crash_before_the_rename_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    OffsetCheckpointFile(path).write({TopicPartition("a", 0): 1})
    # A crash mid-write leaves only a partial .tmp beside the intact checkpoint.
    (tmp_path / "cp.tmp").write_text("0\n5\na 0 ")
    assert OffsetCheckpointFile(path).read() == {TopicPartition("a", 0): 1}
    OffsetCheckpointFile(path).write({TopicPartition("a", 0): 2})  # and the next write works
    assert OffsetCheckpointFile(path).read() == {TopicPartition("a", 0): 2}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "missing the version"),
        ("1\n0\n", "unsupported version"),
        ("0\nx\n", "malformed count"),
        ("0\n2\na 0 1\n", "expected 2 entries, found 1"),
        ("0\n1\na 0\n", "malformed line"),
        ("0\n1\na zero 1\n", "malformed line"),
        ("0\n1\na 0 1 2\n", "malformed line"),
        ("0\n2\na 0 1\na 0 2\n", "listed twice"),
        ("\udcff", "unreadable"),
    ],
)
def test_corrupt_file_names_the_file(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(CorruptCheckpointError) as caught:
        OffsetCheckpointFile(path).read()
    assert str(path) in caught.value.message
    assert why in caught.value.message
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_topics_that_cannot_be_written_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetCheckpointFile(tmp_path / "cp").write({TopicPartition("has space", 0): 1})
    assert not (tmp_path / "cp").exists()


def test_generic_checkpoint_for_leader_epochs(tmp_path: Path) -> None:
    cp: CheckpointFile[tuple[int, int]] = CheckpointFile(
        tmp_path / "leader-epoch-checkpoint",
        lambda e: f"{e[0]} {e[1]}",
        lambda line: (int(line.split()[0]), int(line.split()[1])),
    )
    cp.write([(0, 0), (3, 1500)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 1500\n"
    assert cp.read() == [(0, 0), (3, 1500)]
