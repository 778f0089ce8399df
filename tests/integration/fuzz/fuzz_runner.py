"""The gateway fuzz run: examples of every Gateway method, shuffled, sent in rounds by a small
thread pool (most calls are quick; some park in a long poll or a rebalance until their deadline,
which is why the calls of a round overlap), with the oracles after every round.

Produce-type calls run one at a time under a lock, between two reads of the log ends, for the
write oracle. After each round: client quotas a fuzzed AlterClientQuotas set are removed and
topics a fuzzed DeleteTopics removed are recreated (so the probe measures hangs, not throttling
or a missing topic), then the probe, the process check and the log scan. Findings of a round
fail the run at the end of that round, with the round's examples written to a file (and the
first ones printed) so the seed and the request reproduce it.
"""

from __future__ import annotations

import collections
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from fuzz_cluster import (
    LogWatcher,
    Probe,
    dead_processes,
    ensure_topics,
    remove_client_quotas,
    undrain_nodes,
)
from fuzz_gateway import (
    Example,
    Outcome,
    harvest,
    invoke,
    is_produce,
    make_example,
    methods,
    server_bug,
)
from fuzz_logends import LogEndReader, indeterminate, internal_writes, unexpected_growth
from fuzz_values import Pool

from riverlog.cluster import LocalCluster
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import gateway_pb2_grpc


@dataclass(frozen=True)
class FuzzSettings:
    seed: int
    examples_per_method: int
    round_size: int = 24
    workers: int = 6
    call_timeout_s: float = 5.0
    produce_timeout_s: float = 20.0


@dataclass
class Stats:
    calls: int = 0
    rounds: int = 0
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    # (method, status) of the statuses worth a look: not OK, INVALID_ARGUMENT, UNAUTHENTICATED
    notable: collections.Counter[str] = field(default_factory=collections.Counter)
    notes: dict[str, str] = field(default_factory=dict)  # the first such example and details
    produce_checked: int = 0
    produce_skipped: int = 0

    def summary(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in self.statuses.most_common())
        notable = ", ".join(
            f"{k} {v} [first: {self.notes[k]}]" for k, v in self.notable.most_common()
        )
        return (
            f"{self.calls} calls in {self.rounds} rounds; statuses: {top} ({notable}); write "
            f"oracle checked {self.produce_checked} produce calls, skipped {self.produce_skipped}"
        )


class GatewayFuzzer:
    def __init__(
        self,
        cluster: LocalCluster,
        pool: Pool,
        pool_topics: list[tuple[str, int, int]],
        probe: Probe,
        settings: FuzzSettings,
        report_dir: Path,
    ) -> None:
        self.cluster = cluster
        self.pool = pool
        self.pool_topics = pool_topics
        self.probe = probe
        self.settings = settings
        self.report_dir = report_dir
        self.channel = sync_channel(cluster.gateway_address)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        self.log_ends = LogEndReader(cluster.storage_addresses)
        self.logs = LogWatcher(cluster)
        self.stats = Stats()
        self._produce_lock = threading.Lock()
        self._unsettled = False

    def close(self) -> None:
        self.log_ends.close()
        self.channel.close()

    def plan(self) -> list[tuple[int, int]]:
        """(method index, example index) of the whole run, in a seeded random order."""
        count = len(methods())
        plan = [(m, i) for m in range(count) for i in range(self.settings.examples_per_method)]
        random.Random(self.settings.seed).shuffle(plan)
        return plan

    def run(self) -> Stats:
        plan = self.plan()
        all_methods = methods()
        size = self.settings.round_size
        with ThreadPoolExecutor(self.settings.workers, thread_name_prefix="fuzz") as executor:
            for start in range(0, len(plan), size):
                examples = [
                    make_example(self.settings.seed, all_methods[m], i, self.pool)
                    for m, i in plan[start : start + size]
                ]
                self._round(executor, examples)
        return self.stats

    def _round(self, executor: ThreadPoolExecutor, examples: list[Example]) -> None:
        self.stats.rounds += 1
        futures = [executor.submit(self._one, ex) for ex in examples]
        findings: list[str] = []
        bound = self.settings.produce_timeout_s * len(examples) + 60
        for example, future in zip(examples, futures, strict=True):
            outcome, found = future.result(timeout=bound)
            self.stats.calls += 1
            self.stats.statuses[outcome.code.name] += 1
            if outcome.code.name not in ("OK", "INVALID_ARGUMENT", "UNAUTHENTICATED"):
                key = f"{example.method.name} {outcome.code.name}"
                self.stats.notable[key] += 1
                self.stats.notes.setdefault(key, f"{example.name}: {outcome.details[:120]}")
                self._note(example, outcome)
            harvest(self.pool, example, outcome)
            findings += found
        names = {ex.method.name for ex in examples}
        try:
            if "AlterClientQuotas" in names:
                remove_client_quotas(self.stub)
            if "AlterNodeDraining" in names:
                undrain_nodes(self.stub)
            if "DeleteTopics" in names:
                ensure_topics(self.stub, self.pool_topics)
            self.probe.check()
        except (AssertionError, grpc.RpcError) as exc:
            findings.append(f"health probe after round {self.stats.rounds} failed: {exc!r}")
        findings += dead_processes(self.cluster)
        findings += self.logs.findings()
        if findings:
            raise AssertionError(self._report(findings, examples))

    def _one(self, example: Example) -> tuple[Outcome, list[str]]:
        if is_produce(example.method):
            with self._produce_lock:
                return self._produce(example)
        outcome = invoke(self.channel, example, self.settings.call_timeout_s)
        found = [f for f in (server_bug(example, outcome),) if f]
        if example.method.name == "DeleteRecords":
            found += internal_writes(example, outcome)
        return outcome, found

    def _produce(self, example: Example) -> tuple[Outcome, list[str]]:
        before = self.log_ends.settled() if self._unsettled else self.log_ends.read()
        outcome = invoke(self.channel, example, self.settings.produce_timeout_s)
        after = self.log_ends.read()
        found = [f for f in (server_bug(example, outcome),) if f]
        found += internal_writes(example, outcome)
        self._unsettled = indeterminate(example, outcome)
        if self._unsettled:
            self.stats.produce_skipped += 1
        else:
            self.stats.produce_checked += 1
            found += unexpected_growth(example, outcome, before, after)
        return outcome, found

    def _note(self, example: Example, outcome: Outcome) -> None:
        """Keep the whole example of a notable status (for a look after the run)."""
        self.report_dir.mkdir(parents=True, exist_ok=True)
        with (self.report_dir / "notable.txt").open("a") as f:
            f.write(f"{outcome.code.name} {outcome.details[:300]}\n{example.describe(20_000)}\n\n")

    def _report(self, findings: list[str], examples: list[Example]) -> str:
        self.report_dir.mkdir(parents=True, exist_ok=True)
        path = self.report_dir / f"fuzz-round-{self.stats.rounds}.txt"
        path.write_text("\n\n".join(ex.describe(limit=100_000) for ex in examples))
        named = [ex for ex in examples if any(f.startswith(ex.name + " ") for f in findings)]
        shown = "\n".join(ex.describe(limit=400) for ex in (named or examples)[:6])
        return (
            f"fuzz findings in round {self.stats.rounds} (seed {self.settings.seed}; "
            f"RIVERLOG_FUZZ_SEED={self.settings.seed} reruns it):\n- "
            + "\n- ".join(findings)
            + f"\nthe round's {len(examples)} examples are in {path}; the first ones:\n{shown}"
        )
