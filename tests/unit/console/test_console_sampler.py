"""The sampler's bookkeeping, on a stand-in for the SDK's AdminClient that answers from a
dict (the real one is exercised by tests/integration/console): points per key, rates from end
offsets, a failed sample kept as the key's error, idle keys dropped, at most MAX_KEYS kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from riverlog.client import AdminClient
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.console.sampler import ENDS, MAX_KEYS, Sampler
from riverlog.console.series import Point


@dataclass
class _Offset:
    offset: int


@dataclass
class _Partition:
    partition: int


@dataclass
class _Topic:
    partitions: tuple[_Partition, ...]


class _Admin:
    """describe_topics and list_offsets(latest) over `ends`; unknown topics are refused."""

    def __init__(self) -> None:
        self.ends: dict[str, list[int]] = {}

    def describe_topics(self, names: list[str]) -> dict[str, _Topic]:
        [name] = names
        if name not in self.ends:
            raise RiverlogError(f"no topic {name}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return {name: _Topic(tuple(_Partition(p) for p in range(len(self.ends[name]))))}

    def list_offsets(self, queries: dict[TopicPartition, int]) -> dict[TopicPartition, Any]:
        return {tp: _Offset(self.ends[tp.topic][tp.partition]) for tp in queries}


def _sampler(admin: _Admin, now: list[float], idle_s: float = 600.0) -> Sampler:
    return Sampler(cast(AdminClient, admin), 1.0, 10, idle_s=idle_s, clock=lambda: now[0])


def test_end_offsets_become_records_per_second() -> None:
    admin, now = _Admin(), [100.0]
    admin.ends["orders"] = [10, 20]
    sampler = _sampler(admin, now)
    sampler.watch((ENDS, "orders"))
    sampler.sample_once()
    admin.ends["orders"] = [30, 40]
    now[0] = 102.0
    sampler.sample_once()
    assert sampler.points((ENDS, "orders")) == [Point(102.0, 20.0)]  # 40 records in 2 s
    assert sampler.error((ENDS, "orders")) == ""


def test_a_failed_sample_is_the_keys_error_and_sampling_goes_on() -> None:
    admin, now = _Admin(), [0.0]
    sampler = _sampler(admin, now)
    sampler.watch((ENDS, "later"))
    sampler.sample_once()
    assert sampler.error((ENDS, "later")) == "UNKNOWN_TOPIC_OR_PARTITION: no topic later"
    admin.ends["later"] = [5]
    sampler.sample_once()
    assert sampler.error((ENDS, "later")) == ""


def test_idle_keys_are_dropped_and_at_most_max_keys_are_kept() -> None:
    admin, now = _Admin(), [0.0]
    sampler = _sampler(admin, now, idle_s=0.0)
    admin.ends["a"] = [1]
    sampler.watch((ENDS, "a"))
    sampler.sample_once()  # asked for longer than idle_s ago: dropped, not sampled
    assert sampler.points((ENDS, "a")) == []
    sampler = _sampler(admin, now)
    for i in range(MAX_KEYS + 5):
        sampler.watch((ENDS, f"t{i}"))
    sampler.sample_once()
    errors = [sampler.error((ENDS, f"t{i}")) for i in range(5, MAX_KEYS + 5)]
    assert all(e.startswith("UNKNOWN_TOPIC_OR_PARTITION") for e in errors)
    assert sampler.error((ENDS, "t0")) == ""  # the oldest five were let go
