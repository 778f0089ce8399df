"""The log dir failure channel (Kafka's LogDirFailureChannel, minimally): an I/O error takes
its log dir offline, other errors do not, and the node halts once every dir is offline."""

from __future__ import annotations

from pathlib import Path

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.storage.log.dir_failure import LogDirFailureChannel, is_storage_error


def disk_error(message: str = "write failed") -> RiverlogError:
    """What the log layer raises when a write fails: KAFKA_STORAGE_ERROR from an OSError."""
    try:
        try:
            raise OSError(28, "No space left on device")
        except OSError as exc:
            raise RiverlogError(message, ErrorCode.KAFKA_STORAGE_ERROR) from exc
    except RiverlogError as wrapped:
        return wrapped


def test_only_disk_errors_count() -> None:
    assert is_storage_error(OSError(28, "No space left on device"))
    assert is_storage_error(disk_error())
    # a closed log (replica stopped or deleted under the request) is not a failed disk
    assert not is_storage_error(RiverlogError("the log is closed", ErrorCode.KAFKA_STORAGE_ERROR))
    assert not is_storage_error(RiverlogError("diverged", ErrorCode.OFFSET_OUT_OF_RANGE))
    assert not is_storage_error(ValueError("bad"))


def test_a_failed_dir_goes_offline_and_the_last_one_halts_the_node(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    halts: list[int] = []
    channel = LogDirFailureChannel([a, b], halt=lambda: halts.append(1))
    channel.storage_error(a, RiverlogError("not a disk problem", ErrorCode.NOT_LEADER_OR_FOLLOWER))
    channel.storage_error(None, OSError(28, "no space"))  # a partition with no known dir
    assert channel.offline == set() and halts == []
    channel.storage_error(a, OSError(28, "No space left on device"))
    assert channel.is_offline(a) and not channel.is_offline(b) and halts == []
    channel.storage_error(a, OSError(5, "I/O error"))  # again: still one dir down
    assert halts == []
    channel.storage_error(b, RiverlogError("the log is closed", ErrorCode.KAFKA_STORAGE_ERROR))
    assert halts == []
    channel.storage_error(b, disk_error())
    assert channel.offline == {a, b} and halts == [1]


def test_listeners_hear_of_each_failed_dir_once_and_not_of_the_last(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    heard: list[Path] = []
    channel = LogDirFailureChannel([a, b], halt=lambda: None)
    channel.on_offline.append(heard.append)
    channel.storage_error(a, OSError(28, "No space left on device"))
    channel.storage_error(a, disk_error())
    assert heard == [a]  # the node then reports the replicas on `a` to the controller
    channel.storage_error(b, disk_error())
    assert heard == [a]  # the last dir halts the node instead
