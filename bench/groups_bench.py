"""Consumer-group figures against a real local cluster. Prints figures; not a test.

Starts a cluster with the launcher (etcd, one metadata instance, three storage nodes, two group
coordinators, one gateway, all on this machine; `__consumer_offsets` with 6 partitions) and:

1. rebalance after a join: a group of 9 SDK consumers (threads of this process) on a topic of
   100 partitions is Stable; a 10th subscribes; prints the time from its subscribe() until the
   coordinator reports the group Stable with 10 members in a new generation (DescribeGroups
   polled every 10 ms), and until all 100 partitions are owned again with every member owning
   some (with cooperative-sticky that includes the follow-up rebalance);
2. rebalance after a death: one of the 10 stops polling and heartbeating without a LeaveGroup
   (as after kill -9); prints the time until the group is Stable again with 9 members — bounded
   below by session.timeout.ms (`--session-timeout-ms`, default 6000) — and, for comparison,
   the time after a member that closes cleanly (LeaveGroup);
3. group consume throughput: 3 consumers, each in its own process, read N records (default
   300,000 of 100 bytes, 12 partitions, acks=1) from the beginning; prints records/s and MB/s
   from the first record any member read to the last.

Each phase runs `--rounds` times (default 3) and prints every round and the median.

    .venv/bin/python bench/groups_bench.py [--records N] [--rounds 3] [--session-timeout-ms 6000]
        [--strategy range] [--bootstrap host:port]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from riverlog.client import (
    AdminClient,
    Consumer,
    NewTopic,
    Producer,
)
from riverlog.cluster import LocalCluster, unique_topic_name

VALUE_SIZE = 100


class Member:
    """A consumer polling in a thread; `die()` stops it with no LeaveGroup."""

    def __init__(self, bootstrap: str, group: str, topic: str, args: argparse.Namespace) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "latest",
                "session.timeout.ms": args.session_timeout_ms,
                "heartbeat.interval.ms": max(args.session_timeout_ms // 10, 100),
                "partition.assignment.strategy": args.strategy,
            }
        )
        self.stop = threading.Event()
        self.consumer.subscribe([topic])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(timeout_ms=100)

    def die(self) -> None:
        """Stop polling and heartbeating, send nothing more (a crash as the group sees it)."""
        self.stop.set()
        self.thread.join(30)
        coordinator = self.consumer._coordinator
        assert coordinator is not None
        coordinator.heartbeat.stop()
        self.consumer._conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def wait_stable(admin: AdminClient, group: str, members: int, after_generation: int) -> int:
    """Poll DescribeGroups until Stable with `members` members past `after_generation`."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        g = admin.describe_groups([group])[group]
        if g.state == "Stable" and len(g.members) == members and g.generation_id > after_generation:
            return g.generation_id
        time.sleep(0.01)
    raise TimeoutError(f"group {group} not Stable with {members} members")


def rebalance_rounds(bootstrap: str, args: argparse.Namespace) -> None:
    join, join_owned, death, leave = [], [], [], []
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        for r in range(args.rounds):
            topic = unique_topic_name("bench-groups")
            admin.create_topics([NewTopic(topic, 100, 1)])
            time.sleep(1.0)
            group = f"{topic}-g"
            members = [Member(bootstrap, group, topic, args) for _ in range(9)]
            generation = wait_stable(admin, group, 9, 0)
            time.sleep(0.5)
            start = time.perf_counter()
            tenth = Member(bootstrap, group, topic, args)
            members.append(tenth)
            generation = wait_stable(admin, group, 10, generation)
            stable = time.perf_counter() - start
            while not all(m.consumer.assignment() for m in members) or (
                sum(len(m.consumer.assignment()) for m in members) != 100
            ):
                time.sleep(0.005)  # cooperative: until the follow-up rebalance handed them out
            owned = time.perf_counter() - start
            join.append(stable)
            join_owned.append(owned)
            time.sleep(0.5)
            start = time.perf_counter()
            members.pop(0).die()
            generation = wait_stable(admin, group, 9, generation)
            death.append(time.perf_counter() - start)
            time.sleep(0.5)
            start = time.perf_counter()
            members.pop(0).close()
            wait_stable(admin, group, 8, generation)
            leave.append(time.perf_counter() - start)
            print(
                f"round {r + 1}: join → Stable {stable * 1000:.0f} ms (all owned again "
                f"{owned * 1000:.0f} ms); death → Stable {death[-1] * 1000:.0f} ms; "
                f"clean leave → Stable {leave[-1] * 1000:.0f} ms",
                flush=True,
            )
            for m in members:
                m.close()

    def ms(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 1000:.0f} ms"

    print(
        f"median, 10 members x 100 partitions ({args.strategy}, session.timeout.ms "
        f"{args.session_timeout_ms}): a member joins → Stable {ms(join)} (all partitions "
        f"owned again {ms(join_owned)}); a member dies → Stable {ms(death)}; a member leaves "
        f"cleanly → Stable {ms(leave)}"
    )


def member_main(bootstrap: str, topic: str, group: str, want: int) -> None:
    """`--member`: read until the group has read everything (idle 3 s); print one JSON line."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "max.poll.records": 5000,
        }
    )
    consumer.subscribe([topic])
    count, first, last, idle_since = 0, 0.0, 0.0, time.monotonic()
    while time.monotonic() - idle_since < 3.0 or count == 0:
        batches = consumer.poll(timeout_ms=200)
        if batches:
            now = time.time()
            first = first or now
            last = now
            count += sum(len(r) for r in batches.values())
            idle_since = time.monotonic()
        if count >= want:
            break
    consumer.close()
    print(json.dumps({"count": count, "first": first, "last": last}), flush=True)


def throughput_rounds(bootstrap: str, args: argparse.Namespace) -> None:
    rates = []
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        for r in range(args.rounds):
            topic = unique_topic_name("bench-groups-tp")
            admin.create_topics([NewTopic(topic, 12, 1)])
            time.sleep(1.0)
            value = b"x" * VALUE_SIZE
            with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5) as p:
                for _ in range(args.records):
                    p.send(topic, value)
                p.flush()
            group = f"{topic}-g"
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--member",
                        bootstrap,
                        topic,
                        group,
                        str(args.records),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(3)
            ]
            results = [
                json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs
            ]
            total = sum(x["count"] for x in results)
            span = max(x["last"] for x in results) - min(x["first"] for x in results if x["first"])
            rate = total / span
            rates.append(rate)
            print(
                f"round {r + 1}: 3 members read {total:,} records (of {args.records:,}) in "
                f"{span:.2f} s: {rate:,.0f} records/s ({rate * VALUE_SIZE / 1e6:.1f} MB/s); "
                f"per member {[x['count'] for x in results]}",
                flush=True,
            )
    rate = statistics.median(rates)
    print(
        f"median group consume throughput, 3 members (processes), 12 partitions: {rate:,.0f} "
        f"records/s ({rate * VALUE_SIZE / 1e6:.1f} MB/s)"
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--member":
        member_main(argv[1], argv[2], argv[3], int(argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--strategy", default="range")
    parser.add_argument("--bootstrap", help="use a running cluster (with coordinators)")
    parser.add_argument("--skip-rebalance", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args(argv)

    def run(address: str) -> None:
        if not args.skip_rebalance:
            rebalance_rounds(address, args)
        if not args.skip_throughput:
            throughput_rounds(address, args)

    if args.bootstrap:
        run(args.bootstrap)
        return
    with tempfile.TemporaryDirectory(prefix="riverlog-groups-bench-") as data_dir:
        cluster = LocalCluster(
            data_dir,
            storage_nodes=3,
            metadata_nodes=1,
            gateways=1,
            coordinators=2,
            extra_config={
                "metadata": {"offsets.topic.num.partitions": "6"},
                "coordinator": {"group.min.session.timeout.ms": "500"},
            },
        )
        with cluster:
            run(cluster.gateway_address)


if __name__ == "__main__":
    main()
