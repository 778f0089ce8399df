"""Kafka's sampled rate: what "bytes per second" means for a quota, to the millisecond.

A quota is only as fair as its measurement, and clients compare throttling across brokers and
gateways, so this is Kafka's `Rate` over a `SampledStat`/`WindowedSum` rule for rule rather than
a generic moving average. Usage is summed into samples of `quota.window.size.seconds` (1 s);
`quota.window.num` (11) of them make the window, plus one spare slot so a sample that started
before the window but still has events in it is kept. A sample is retired once its last event
is a full window (num * size) old. The rate is the sum of the kept samples divided by the time
since the oldest kept sample started, except that this elapsed time is never taken as less than
(num - 1) whole samples: at start-up, or after an idle period purged everything, the missing
samples count as zero-usage time, so the first burst is not measured over a few milliseconds.

Samples start when the first value after the previous sample's end is recorded (not on a fixed
grid), exactly as in Kafka. Everything here is pure: time comes in as `now_ms` from the caller's
injected clock; `record` is O(1), `measure` O(num).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode, RiverlogError


@dataclass(frozen=True, slots=True)
class WindowConfig:
    """Kafka's `quota.window.num` (samples) and `quota.window.size.seconds` (in ms here)."""

    samples: int = 11
    sample_ms: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise RiverlogError(
                f"invalid value {self.samples} for quota.window.num: must be at least 1",
                ErrorCode.INVALID_CONFIG,
            )
        if self.sample_ms < 1:
            raise RiverlogError(
                f"invalid sample size {self.sample_ms} ms: quota.window.size.seconds must be"
                " at least 1",
                ErrorCode.INVALID_CONFIG,
            )

    @classmethod
    def from_kafka(cls, quota_window_num: int, quota_window_size_seconds: int) -> WindowConfig:
        if quota_window_size_seconds < 1:
            raise RiverlogError(
                f"invalid value {quota_window_size_seconds} for quota.window.size.seconds:"
                " must be at least 1",
                ErrorCode.INVALID_CONFIG,
            )
        return cls(quota_window_num, quota_window_size_seconds * 1000)

    @property
    def expire_age_ms(self) -> int:
        """A sample whose last event is this old is obsolete (num * size)."""
        return self.samples * self.sample_ms

    @property
    def min_window_ms(self) -> int:
        """The shortest time a rate is ever measured over, bar the current sample's share."""
        return (self.samples - 1) * self.sample_ms


@dataclass(frozen=True, slots=True)
class SampleState:
    """One sample as it crosses processes (a quota instance handing its windows over): times
    as ages before the sender's now, since monotonic clocks are per process."""

    start_age_ms: int
    last_event_age_ms: int
    value: float
    event_count: int


class _Sample:
    """One sample: the sum of values recorded from `start_ms` for one sample length."""

    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0
        self.event_count = 0

    @classmethod
    def at(cls, start_ms: int, last_event_ms: int, value: float, event_count: int) -> _Sample:
        sample = cls(start_ms)
        sample.last_event_ms = last_event_ms
        sample.value = value
        sample.event_count = event_count
        return sample

    def fold(self, other: _Sample) -> None:
        """Take `other`'s usage into this sample (the earlier start stays)."""
        self.start_ms = min(self.start_ms, other.start_ms)
        self.last_event_ms = max(self.last_event_ms, other.last_event_ms)
        self.value += other.value
        self.event_count += other.event_count

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0
        self.event_count = 0

    def __repr__(self) -> str:
        return (
            f"Sample(start={self.start_ms}, last={self.last_event_ms}, value={self.value},"
            f" events={self.event_count})"
        )


class SampledRate:
    """Kafka's `Rate` (per second) over a ring of `samples + 1` samples.

    Lifecycle: one per metric entity and quota kind, created on first use, dropped by its owner
    when `last_record_ms` is an hour old. Not thread-safe: one task owns it. Values may be
    negative (Kafka "unrecords" a fetch it answered empty that way).
    """

    __slots__ = ("_config", "_current", "_last_record_ms", "_samples")

    def __init__(self, config: WindowConfig) -> None:
        self._config = config
        self._samples: list[_Sample] = []
        self._current = 0
        self._last_record_ms: int | None = None

    @property
    def config(self) -> WindowConfig:
        return self._config

    @property
    def last_record_ms(self) -> int | None:
        """When a value was last recorded (None: never); owners expire idle rates by it."""
        return self._last_record_ms

    def record(self, value: float, now_ms: int) -> None:
        """Add `value` at `now_ms` (Kafka's `SampledStat.record`): into the current sample, or
        into a fresh one if the current sample is a full sample length old."""
        if not self._samples:
            self._samples.append(_Sample(now_ms))
            self._current = 0
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self._config.sample_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms
        self._last_record_ms = now_ms

    def _advance(self, now_ms: int) -> _Sample:
        # one slot more than `samples`: a sample overlapping the window's start stays counted
        self._current = (self._current + 1) % (self._config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def purge_obsolete(self, now_ms: int) -> None:
        """Reset every sample whose last event is at least num * size old (Kafka's
        `purgeObsoleteSamples`); a sample that started earlier but saw events since is kept."""
        expire_age = self._config.expire_age_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def total(self, now_ms: int) -> float:
        """The sum of the samples still in the window (Kafka's `WindowedSum.measure`)."""
        self.purge_obsolete(now_ms)
        return sum(sample.value for sample in self._samples)

    def window_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's `Rate.windowSize`): since the oldest
        kept sample started, and never less than num - 1 whole samples."""
        self.purge_obsolete(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return self._window_for(now_ms - oldest)

    def measure(self, now_ms: int) -> float:
        """Units per second over the window (Kafka's `Rate.measure`): `total / window_ms`,
        with one purge instead of two (it runs on every recorded request)."""
        self.purge_obsolete(now_ms)
        samples = self._samples
        total = sum(s.value for s in samples)
        oldest = min((s.start_ms for s in samples), default=now_ms)
        return total / (self._window_for(now_ms - oldest) / 1000.0)

    def headroom(self, bound: float, now_ms: int, horizon_ms: int = 0) -> float:
        """How much may be recorded at `now_ms` while the rate stays within `bound` (per
        second) from now until `now_ms + horizon_ms`, if nothing else is recorded; negative
        when already over. Without new usage, bound x window - total dips only where the
        window shrinks: when a sample is purged (it can take more time than usage along), and,
        while fewer than num - 1 samples are full, at each sample boundary (the padding
        restarts). So it is checked now, at each purge in the horizon, and at the first
        boundary after each. Usage recorded now lands in a sample whose last event is now,
        which stays."""
        self.purge_obsolete(now_ms)
        config = self._config
        expire_age = config.expire_age_ms
        horizon_end = now_ms + horizon_ms
        purges = sorted(
            {
                s.last_event_ms + expire_age
                for s in self._samples
                if s.event_count and s.last_event_ms + expire_age <= horizon_end
            }
        )
        # the sample usage recorded now would land in: the current one, or a new one
        current = self._samples[self._current] if self._samples else None
        if current is not None and now_ms - current.start_ms >= config.sample_ms:
            current = None
        lowest = math.inf
        for at, until in zip([now_ms, *purges], [*purges, horizon_end], strict=True):
            kept = [
                s
                for s in self._samples
                if s is current or (s.event_count and at - s.last_event_ms < expire_age)
            ]
            starts = [s.start_ms for s in kept]
            oldest = min(starts) if current is not None else min([*starts, now_ms])
            elapsed = at - oldest
            window = self._window_for(elapsed)
            boundary = oldest + (elapsed // config.sample_ms + 1) * config.sample_ms
            if boundary <= until and boundary - oldest <= config.min_window_ms:
                window = min(window, max(config.min_window_ms, 1))
            lowest = min(lowest, bound * window / 1000.0 - sum(s.value for s in kept))
        return lowest

    def export(self, now_ms: int) -> tuple[SampleState, ...]:
        """The samples still in the window, oldest first, as ages before `now_ms`."""
        self.purge_obsolete(now_ms)
        kept = sorted((s for s in self._samples if s.event_count), key=lambda s: s.start_ms)
        return tuple(
            SampleState(now_ms - s.start_ms, now_ms - s.last_event_ms, s.value, s.event_count)
            for s in kept
        )

    def absorb(self, samples: tuple[SampleState, ...], now_ms: int) -> None:
        """Add another window's samples to this one (a quota instance taking over an entity):
        usage is summed, never lowered, since the two windows counted disjoint reports. A
        sample starting within a sample length of a kept one joins it; when more than the
        ring holds remain, the oldest are folded into the next so no usage is dropped."""
        self.purge_obsolete(now_ms)
        incoming = [
            _Sample.at(
                now_ms - s.start_age_ms, now_ms - s.last_event_age_ms, s.value, s.event_count
            )
            for s in samples
            if s.event_count
        ]
        if not incoming:
            return
        merged: list[_Sample] = []
        for sample in sorted(
            [*(s for s in self._samples if s.event_count), *incoming], key=lambda s: s.start_ms
        ):
            last = merged[-1] if merged else None
            if last is not None and sample.start_ms - last.start_ms < self._config.sample_ms:
                last.fold(sample)
            else:
                merged.append(sample)
        slots = self._config.samples + 1
        while len(merged) > slots:
            merged[1].fold(merged.pop(0))
        self._samples = merged
        self._current = len(merged) - 1
        newest = max(s.last_event_ms for s in merged)
        if self._last_record_ms is None or newest > self._last_record_ms:
            self._last_record_ms = newest

    def _window_for(self, elapsed: int) -> int:
        """Kafka's padding: never less than num - 1 whole samples; with quota.window.num = 1
        the window can be empty, and a rate over 0 ms is undefined, hence at least 1 ms."""
        sample_ms = self._config.sample_ms
        min_full_samples = self._config.samples - 1
        full_samples = elapsed // sample_ms
        if full_samples < min_full_samples:
            elapsed += (min_full_samples - full_samples) * sample_ms
        return max(elapsed, 1)

    def __repr__(self) -> str:
        return f"SampledRate({self._config}, current={self._current}, samples={self._samples})"
