"""`riverlog dump-log` on a segment the session cluster wrote: batches, and records with
--print-records; a missing file is one error line."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_dump_a_live_segment(riverlog, new_topic, cluster, expect_error) -> None:
    topic = new_topic(partitions=1)
    done = riverlog("produce", topic, "--key-separator", "=", input="k1=first\nk2=second\n")
    assert done.returncode == 0, done.stderr
    segments = sorted(cluster.data_dir.glob(f"data/storage-*/{topic}-0/*.log"))
    assert len(segments) == 1, segments  # replication factor 1: one replica holds it

    batches = riverlog("dump-log", str(segments[0]))
    assert batches.returncode == 0, batches.stderr
    lines = batches.stdout.splitlines()
    assert lines[0] == f"Dumping {segments[0]}"
    assert any(line.startswith("baseOffset: 0 ") and "isvalid: true" in line for line in lines)
    assert not any(line.startswith("| offset:") for line in lines)

    records = riverlog("dump-log", str(segments[0]), "--print-records").stdout.splitlines()
    shown = [line for line in records if line.startswith("| offset:")]
    assert len(shown) == 2
    assert "key: k1 payload: first" in shown[0] and "key: k2 payload: second" in shown[1]


def test_dump_missing_file(riverlog, tmp_path, expect_error) -> None:
    expect_error(riverlog("dump-log", str(tmp_path / "00000000000000000000.log")), "no such file")
    (tmp_path / "notes.txt").write_text("hello")
    expect_error(riverlog("dump-log", str(tmp_path / "notes.txt")), "not a .log")
