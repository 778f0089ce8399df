"""Network faults on a cluster placed in network namespaces (`riverlog.cluster.netns`): the
nemesis primitives of the network fault tests, after Jepsen's `net` and `nemesis` namespaces.

Every fault is an iptables ruleset inside the namespaces of the processes it touches, rebuilt
whole from `Network`'s state with `iptables-restore` each time (so `heal()` is an empty ruleset
everywhere) — nothing outside our namespaces is touched:

- partitions: DROP, both ways, of the packets between two processes (silently, as a cut cable:
  no RST, no ICMP, so TCP and gRPC only notice through their timeouts and keepalives);
- loss: a `statistic` match drops that share of a process's outgoing packets;
- duplication: a `statistic` match TEEs that share of them (a copy to the same destination);
- delay and reordering: the kernel here has no sch_netem, so an NFQUEUE rule hands the
  outgoing packets to `netem_queue.py`, which releases each `delay ± jitter` ms later.

Directions: loss, duplication and delay act on a process's outgoing packets, as netem on its
interface would; applied to every process, every packet meets the fault once.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from riverlog.cluster.netns import NetnsPlacement

NETEM_QUEUE = Path(__file__).resolve().parent / "netem_queue.py"
CLIENTS = "clients"  # the test process (workload, watcher): the bridge's own address
HELPER_START_S = 10.0


@dataclass
class Impairment:
    """What slows or damages one process's outgoing packets."""

    loss_pct: float = 0.0
    duplicate_pct: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder_pct: float = 0.0


class Network:
    """The faults in force, per process name (`storage-1`, `metadata-2`, `etcd`, ...), and
    the helpers they need. Lifecycle: any faults → `heal()` → `close()` (stops helpers)."""

    def __init__(self, placement: NetnsPlacement, run_dir: Path) -> None:
        self.placement = placement
        self.run_dir = run_dir
        self.blocked: dict[str, set[str]] = defaultdict(set)
        self.impaired: dict[str, Impairment] = {}
        self.helpers: dict[str, subprocess.Popen[bytes]] = {}
        self.history: list[str] = []
        self.effects: dict[str, int] = {}  # what the last faults did, read just before heal

    # -- addresses ---------------------------------------------------------------------------

    def address(self, name: str) -> str:
        return self.placement.host_address if name == CLIENTS else self.placement.address_of(name)

    @property
    def names(self) -> list[str]:
        return self.placement.names

    # -- faults ------------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        """Drop everything between `a` and `b` (either may be CLIENTS)."""
        self.blocked[a].add(b)
        self.blocked[b].add(a)

    def partition(self, *groups: Iterable[str]) -> None:
        """Processes in different groups cannot talk; processes in no group see everyone."""
        sets = [set(g) for g in groups]
        for i, group in enumerate(sets):
            for other in sets[i + 1 :]:
                for a in group:
                    for b in other:
                        self.cut(a, b)
        self.apply(f"partition {[sorted(g) for g in sets]}")

    def isolate(self, name: str, others: Iterable[str] | None = None) -> None:
        """Cut `name` from `others` (default: every other process and the clients)."""
        targets = [n for n in self.names if n != name] + [CLIENTS] if others is None else others
        for other in targets:
            if other != name:
                self.cut(name, other)
        self.apply(f"isolate {name} from {sorted(targets)}")

    def ring(self, names: list[str]) -> None:
        """Jepsen's majorities ring: in a ring of `names` (5 or more) each process sees a
        majority (itself and its nearest neighbours), and no two see the same majority."""
        n = len(names)
        if n < 5:
            raise ValueError("a majorities ring needs at least 5 processes")
        reach = -(-(n // 2) // 2)  # neighbours per side: 5 → 1 (3 of 5 seen), 7 → 2 (5 of 7)
        for i in range(n):
            for j in range(i + 1, n):
                if min(j - i, n - (j - i)) > reach:
                    self.cut(names[i], names[j])
        self.apply(f"majorities ring {names}")

    def impair(self, names: Iterable[str], **kwargs: float) -> None:
        """Loss/duplication/delay/reordering of the outgoing packets of each of `names`."""
        targets = list(names)
        for name in targets:
            self.impaired[name] = Impairment(**kwargs)
        self.apply(f"impair {targets}: {kwargs}")

    def heal(self) -> None:
        """Remove every rule and stop every helper (noting first what the rules did)."""
        if self.blocked or self.impaired:
            self.effects = self.counters()
        self.blocked.clear()
        self.impaired.clear()
        self.apply("heal")

    def close(self) -> None:
        """Stop the helpers (the namespaces, with their rules, go with the placement)."""
        self.impaired.clear()
        self._sync_helpers()

    def counters(self) -> dict[str, int]:
        """Packets each kind of rule matched (dropped by partitions or loss, duplicated,
        queued for delay) and TCP segments retransmitted, summed over every namespace: the
        evidence that a fault did something."""
        totals: dict[str, int] = defaultdict(int)
        for name in self.names:
            namespace = self.placement.namespace(name)
            saved = subprocess.run(
                ["ip", "netns", "exec", namespace, "iptables-save", "-c"],
                capture_output=True, text=True, timeout=20, check=False,
            ).stdout  # fmt: skip
            for line in saved.splitlines():
                if not line.startswith("[") or " -j " not in line:
                    continue
                packets = int(line[1:].split(":", 1)[0])
                target = line.rsplit(" -j ", 1)[1].split()[0]
                if "statistic" in line and target == "DROP":
                    kind = "lost"
                else:
                    kind = {"DROP": "cut", "TEE": "duplicated", "NFQUEUE": "delayed"}[target]
                totals[kind] += packets
            snmp = subprocess.run(
                ["ip", "netns", "exec", namespace, "cat", "/proc/net/snmp"],
                capture_output=True, text=True, timeout=20, check=False,
            ).stdout.splitlines()  # fmt: skip
            tcp = [line.split() for line in snmp if line.startswith("Tcp:")]
            if len(tcp) == 2 and "RetransSegs" in tcp[0]:
                totals["tcp retransmits"] += int(tcp[1][tcp[0].index("RetransSegs")])
        return dict(totals)

    # -- rules -------------------------------------------------------------------------------

    def ruleset(self, name: str) -> str:
        lines = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"]
        for other in sorted(self.blocked.get(name, ())):
            address = self.address(other)
            lines.append(f"-A INPUT -s {address}/32 -j DROP")
            lines.append(f"-A OUTPUT -d {address}/32 -j DROP")
        impairment = self.impaired.get(name)
        if impairment is not None:
            if impairment.loss_pct > 0:
                p = impairment.loss_pct / 100
                lines.append(
                    f"-A OUTPUT -o eth0 -m statistic --mode random --probability {p} -j DROP"
                )
            if impairment.duplicate_pct > 0:
                p = impairment.duplicate_pct / 100
                for other in [*self.names, CLIENTS]:
                    if other != name:
                        address = self.address(other)
                        lines.append(
                            f"-A OUTPUT -o eth0 -d {address}/32 -m statistic --mode random "
                            f"--probability {p} -j TEE --gateway {address}"
                        )
            if impairment.delay_ms > 0 or impairment.reorder_pct > 0:
                lines.append("-A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass")
        lines.append("COMMIT")
        return "\n".join(lines) + "\n"

    def apply(self, what: str) -> None:
        """Install every process's ruleset (helpers first, so delays hold once this returns)."""
        self._sync_helpers()
        for name in self.names:
            subprocess.run(
                ["ip", "netns", "exec", self.placement.namespace(name), "iptables-restore"],
                input=self.ruleset(name).encode(),
                check=True,
                capture_output=True,
                timeout=20,
            )
        self.history.append(f"{time.strftime('%H:%M:%S')} {what}")

    def _sync_helpers(self) -> None:
        for name in list(self.helpers):
            impairment = self.impaired.get(name)
            if impairment is None or (impairment.delay_ms <= 0 and impairment.reorder_pct <= 0):
                self._stop_helper(name)
        for name, impairment in self.impaired.items():
            needs = impairment.delay_ms > 0 or impairment.reorder_pct > 0
            if needs and name not in self.helpers:
                self._start_helper(name, impairment)

    def _start_helper(self, name: str, impairment: Impairment) -> None:
        ready = self.run_dir / f"netem-{name}.ready"
        ready.unlink(missing_ok=True)
        log = open(self.run_dir / f"netem-{name}.log", "ab")
        argv = [
            "ip", "netns", "exec", self.placement.namespace(name), sys.executable,
            str(NETEM_QUEUE), "--queue", "0", "--delay-ms", str(impairment.delay_ms),
            "--jitter-ms", str(impairment.jitter_ms), "--reorder", str(impairment.reorder_pct),
            "--ready-file", str(ready),
        ]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.helpers[name] = proc
        deadline = time.monotonic() + HELPER_START_S
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                self._stop_helper(name)
                raise RuntimeError(f"netem helper for {name} did not start (see {ready}.log)")
            time.sleep(0.05)

    def _stop_helper(self, name: str) -> None:
        proc = self.helpers.pop(name)
        if proc.poll() is None:
            proc.terminate()  # by PID: the Popen we started
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
