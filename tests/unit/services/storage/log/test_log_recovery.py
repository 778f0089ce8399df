"""Recovery after an unclean stop: torn tails, flipped bytes, garbage, lost or corrupt
indexes and leftover files. The log must be cut exactly at the first invalid batch, every
batch before it must read back byte-identical, and appends must continue at the right offset."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_log_testkit import (
    TS,
    config,
    crash,
    make_batch,
    offsets_in,
    open_log,
    read_bytes,
    split,
)

from riverlog.common.clock import ManualClock
from riverlog.common.records import CompressionType
from riverlog.common.records.header import parse_header
from riverlog.services.storage.log import LogConfig, PartitionLog

# (segment base offset, position in its .log, the batch's bytes)
Stored = tuple[int, int, bytes]


def on_disk(log_dir: Path) -> list[Stored]:
    """Every batch of every .log file in the directory, as the files hold them."""
    out: list[Stored] = []
    for path in sorted(log_dir.glob("*.log")):
        position = 0
        for batch in split(path.read_bytes()):
            out.append((int(path.name[:20]), position, batch))
            position += len(batch)
    return out


def next_offset(stored: list[Stored]) -> int:
    if not stored:
        return 0
    header = parse_header(stored[-1][2])
    return header.next_offset


def build(
    path: Path, clock: ManualClock, cfg: LogConfig, rng: random.Random, n: int
) -> PartitionLog:
    log = open_log(path, clock, cfg)
    for i in range(n):
        codec = CompressionType.GZIP if rng.random() < 0.2 else CompressionType.NONE
        batch = make_batch(
            rng.randint(1, 5),
            ts=clock.time_ms(),
            value_size=rng.randint(0, 200),
            compression=codec,
            tag=i,
        )
        log.append_as_leader(batch, leader_epoch=1)
        clock.advance(rng.randint(0, 50))
    return log


def check_reopened(
    path: Path, clock: ManualClock, cfg: LogConfig, expected: list[Stored], recovery_point: int = 0
) -> PartitionLog:
    log = open_log(path, clock, cfg, recovery_point=recovery_point)
    assert on_disk(log.dir) == expected
    end = next_offset(expected)
    assert log.log_end_offset == end
    assert log.recovery_point <= end
    log.high_watermark = end
    for _, _, batch in expected:  # every survivor is found through the rebuilt indexes
        header = parse_header(batch)
        assert read_bytes(log, header.base_offset, len(batch)) == batch
        assert read_bytes(log, header.last_offset, 1) == batch
    info = log.append_as_leader(make_batch(2), leader_epoch=2)
    assert info.first_offset == end
    assert offsets_in(read_bytes(log, end)) == [end, end + 1]
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".swap", ".cleaned", ".deleted"))]
    return log


@pytest.fixture
def cfg() -> LogConfig:
    return config(segment_bytes=1500, index_interval_bytes=300, segment_index_bytes=4096)


@pytest.fixture
def written(tmp_path: Path, clock: ManualClock, cfg: LogConfig) -> list[Stored]:
    """A crashed log of 40 batches over several segments; returns what is on disk."""
    log = build(tmp_path, clock, cfg, random.Random(7), 40)
    assert log.segment_count >= 4
    crash(log)
    return on_disk(log.dir)


def log_path(tmp_path: Path, base: int, suffix: str = ".log") -> Path:
    return tmp_path / "orders-0" / f"{base:020d}{suffix}"


def test_clean_data_recovers_unchanged(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored]
) -> None:
    check_reopened(tmp_path, clock, cfg, written).close()


@pytest.mark.parametrize("cut_into_batch", [0, 1, 12, 60, -1])
def test_torn_tail_is_cut_at_the_torn_batch(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored], cut_into_batch: int
) -> None:
    base, position, batch = written[-1]
    keep = position + (cut_into_batch % len(batch))
    os.truncate(log_path(tmp_path, base), keep)
    expected = written if keep == position + len(batch) else written[:-1]
    check_reopened(tmp_path, clock, cfg, expected).close()


def test_flipped_byte_cuts_there_and_deletes_later_segments(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored]
) -> None:
    victim = next(i for i, s in enumerate(written) if s[0] == written[-1][0]) - 3
    base, position, _ = written[victim]
    path = log_path(tmp_path, base)
    data = bytearray(path.read_bytes())
    data[position + 40] ^= 0x10  # inside the CRC'd header fields
    path.write_bytes(bytes(data))
    check_reopened(tmp_path, clock, cfg, written[:victim]).close()
    assert not log_path(tmp_path, written[-1][0]).exists()


@pytest.mark.parametrize("field_offset", [0, 7, 9, 16, 18, 30])
def test_header_damage_outside_and_inside_the_crc(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored], field_offset: int
) -> None:
    # baseOffset (0-7) is outside the CRC: caught by the offset sequence. Length (8-11), magic
    # (16), CRC (17-20) and attributes onward are caught by the length and CRC checks.
    base, position, _ = written[-2]
    path = log_path(tmp_path, base)
    data = bytearray(path.read_bytes())
    data[position + field_offset] ^= 0x01
    path.write_bytes(bytes(data))
    check_reopened(tmp_path, clock, cfg, written[:-2]).close()


@pytest.mark.parametrize("tail", [b"\x00" * 4096, b"\xff" * 30, random.Random(1).randbytes(500)])
def test_garbage_after_the_last_batch_is_cut(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored], tail: bytes
) -> None:
    with open(log_path(tmp_path, written[-1][0]), "ab") as f:
        f.write(tail)
    check_reopened(tmp_path, clock, cfg, written).close()


def test_truncated_middle_segment_drops_everything_after(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored]
) -> None:
    bases = sorted({s[0] for s in written})
    middle = bases[1]
    os.truncate(log_path(tmp_path, middle), 0)
    expected = [s for s in written if s[0] < middle]
    check_reopened(tmp_path, clock, cfg, expected).close()
    assert sorted({s[0] for s in on_disk(tmp_path / "orders-0")}) == [bases[0], middle]


def test_segments_below_the_recovery_point_are_not_scanned(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored]
) -> None:
    bases = sorted({s[0] for s in written})
    base, position, _ = written[1]
    path = log_path(tmp_path, base)
    data = bytearray(path.read_bytes())
    data[position + 70] ^= 0xFF  # a bad CRC in a flushed segment goes unnoticed (as in Kafka)
    path.write_bytes(bytes(data))
    files = {p.name: p.read_bytes() for p in (tmp_path / "orders-0").glob("*.log")}
    log = open_log(tmp_path, clock, cfg, recovery_point=bases[2])
    assert {p.name: p.read_bytes() for p in log.dir.glob("*.log")} == files
    assert log.log_end_offset == next_offset(written)
    assert log.recovery_point == bases[2]
    log.close()


@pytest.mark.parametrize("damage", ["delete", "garbage", "zeros", "partial", "truncate"])
@pytest.mark.parametrize("clean", [True, False])
def test_missing_or_corrupt_indexes_are_rebuilt(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, damage: str, clean: bool
) -> None:
    log = build(tmp_path, clock, cfg, random.Random(3), 40)
    log.close()  # a clean stop: indexes trimmed and trusted unless they look wrong
    written = on_disk(log.dir)
    bases = sorted({s[0] for s in written})
    for base in bases[:3]:
        for suffix, size in ((".index", 8), (".timeindex", 12)):
            path = log_path(tmp_path, base, suffix)
            if damage == "delete":
                path.unlink()
            elif damage == "garbage":
                path.write_bytes(os.urandom(size * 7))
            elif damage == "zeros":
                path.write_bytes(bytes(size * 9))
            elif damage == "partial":
                path.write_bytes(path.read_bytes() + b"\x01")
            elif path.stat().st_size > size:
                path.write_bytes(path.read_bytes()[size:])  # drop the first entry: still sorted
    reopened = open_log(
        tmp_path, clock, cfg, recovery_point=next_offset(written), clean_shutdown=clean
    )
    assert on_disk(reopened.dir) == written
    reopened.high_watermark = reopened.log_end_offset
    for _, _, batch in written:
        header = parse_header(batch)
        assert read_bytes(reopened, header.base_offset + header.last_offset_delta, 1) == batch
    assert reopened.offset_for_timestamp(TS) == (0, TS)
    reopened.close()


def test_leftover_files_are_removed(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored]
) -> None:
    d = tmp_path / "orders-0"
    leftovers = [
        d / "00000000000000000000.log.deleted",
        d / "00000000000000000007.log.cleaned",
        d / "00000000000000000000.index.swap",
        d / "00000000000000999999.index",
        d / "00000000000000999999.timeindex",
    ]
    for path in leftovers:
        path.write_bytes(b"junk")
    (d / "leader-epoch-checkpoint").write_text("0\n0\n")
    check_reopened(tmp_path, clock, cfg, written).close()
    assert not any(p.exists() for p in leftovers)
    assert (d / "leader-epoch-checkpoint").exists()  # not ours: left alone


def test_log_start_offset_beyond_the_recovered_end_starts_afresh(
    tmp_path: Path, clock: ManualClock, cfg: LogConfig, written: list[Stored]
) -> None:
    end = next_offset(written)
    log = open_log(tmp_path, clock, cfg, log_start_offset=end + 10)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (end + 10,) * 2 + (1,)
    assert on_disk(log.dir) == []
    log.close()


def test_new_log_starts_at_the_log_start_offset(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, log_start_offset=42)
    assert (log.log_start_offset, log.log_end_offset) == (42, 42)
    assert log_path(tmp_path, 42).exists()
    assert log.append_as_leader(make_batch(1), 0).first_offset == 42
    log.close()


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, int, int, str, float, float, int]:
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 25))
    segment_bytes = draw(st.integers(1200, 4000))  # the largest batch built is ~1100 bytes
    action = draw(st.sampled_from(["truncate", "flip", "garbage"]))
    where = draw(st.floats(0, 1, exclude_max=True))
    recovery = draw(st.floats(0, 1))
    flips = draw(st.integers(1, 3))
    return seed, n, segment_bytes, action, where, recovery, flips


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_recovery_property(scenario: tuple[int, int, int, str, float, float, int]) -> None:
    seed, n, segment_bytes, action, where, recovery, flips = scenario
    rng = random.Random(seed)
    clock = ManualClock(TS)
    cfg = config(segment_bytes=segment_bytes, index_interval_bytes=rng.choice([0, 100, 4096]))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = build(root, clock, cfg, rng, n)
        crash(log)
        written = on_disk(root / "orders-0")
        bases = sorted({s[0] for s in written}) or [0]
        # The recovery point lies in some segment; damage goes at or after that segment.
        first = int(recovery * len(bases)) if recovery < 1 else len(bases) - 1
        in_scope = [s for s in written if s[0] >= bases[first]]
        upper = bases[first + 1] if first + 1 < len(bases) else bases[first] + 4
        rp = rng.randrange(bases[first], upper)  # inside that segment
        if not in_scope:
            check_reopened(root, clock, cfg, written, recovery_point=rp).close()
            return
        victim = int(where * len(in_scope))
        base, position, batch = in_scope[victim]
        index = written.index(in_scope[victim])
        path = log_path(root, base)
        data = bytearray(path.read_bytes())
        if action == "truncate":
            keep = position + rng.randrange(len(batch))
            del data[keep:]
            expected = written[:index]
            expected = [s for s in expected if s[0] < base or s[1] + len(s[2]) <= keep]
        elif action == "flip":
            for _ in range(flips):
                spot = rng.choice([i for i in range(len(batch)) if not 12 <= i < 16])
                data[position + spot] ^= rng.randint(1, 255)
            expected = written[:index]
        else:
            data[position + len(batch) :] = os.urandom(rng.randint(1, 100))
            expected = written[: index + 1]
        path.write_bytes(bytes(data))
        check_reopened(root, clock, cfg, expected, recovery_point=rp).close()
