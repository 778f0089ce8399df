"""A placement for fault tests: every process of a local cluster in a Linux network namespace
of its own, with its own private address, so a test can cut one process off from the others
(iptables rules inside its namespace) or slow its link down.

Layout, all created here and removed by `close()`: a bridge `rlft-<n>-br` in this machine's
namespace holding 10.77.<n>.1/24 (where this process, the test's clients, reach the cluster
from), and per process a namespace `rlft-<owner pid>-<n>-<process name>` whose `eth0` (a veth
whose other end `rlft-<n>-<k>` is a port of the bridge) holds 10.77.<n>.<k+2>/24, plus `lo`.
No namespace has a default route and nothing is routed or forwarded elsewhere: 10.77.<n>.0/24
exists only between these namespaces and the bridge, and no packet leaves the machine.

Every name starts with `rlft-` and records its owner's PID (in the namespace name, in the
link's alias), so `find_leftovers` finds exactly what an earlier run that did not clean up
left behind (its owner is gone) and never what a run still going owns. Needs root and
iproute2; `netns_unavailable()` says why it cannot be used here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .errors import ClusterError

PREFIX = "rlft-"
SUBNET = "10.77"  # 10.77.<n>.0/24, n per placement
MAX_SUBNETS = 200
ALIAS = "rlft owner pid "
COMMAND_TIMEOUT_S = 20.0


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
    )
    if check and done.returncode != 0:
        raise ClusterError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is missing"
    probe = _run(["ip", "-j", "netns", "list"], check=False)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()}"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _json(argv: Sequence[str]) -> list[dict[str, object]]:
    out = _run(argv).stdout.strip()
    data = json.loads(out) if out else []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _namespaces() -> list[str]:
    return [str(d.get("name", "")) for d in _json(["ip", "-j", "netns", "list"])]


def _links() -> list[tuple[str, str]]:
    """(name, alias) of every link in this namespace."""
    return [
        (str(d.get("ifname", "")), str(d.get("ifalias", "")))
        for d in _json(["ip", "-j", "link", "show"])
    ]


def _owner_of_namespace(name: str, prefix: str) -> int | None:
    head = name[len(prefix) :].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _owner_of_alias(alias: str) -> int | None:
    tail = alias[len(ALIAS) :] if alias.startswith(ALIAS) else ""
    return int(tail) if tail.isdigit() else None


@dataclass(frozen=True, slots=True)
class Leftovers:
    """Namespaces and links with our prefix whose owner process is gone."""

    namespaces: tuple[str, ...] = ()
    links: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.links)

    def __str__(self) -> str:
        return f"namespaces {list(self.namespaces)}, links {list(self.links)}"


def find_leftovers(prefix: str = PREFIX) -> Leftovers:
    """What earlier runs left: our namespaces and links whose owner PID no longer runs (a link
    without an owner alias but with our prefix counts too)."""
    namespaces = tuple(
        n
        for n in _namespaces()
        if n.startswith(prefix)
        and not ((owner := _owner_of_namespace(n, prefix)) and _pid_alive(owner))
    )
    links = tuple(
        name
        for name, alias in _links()
        if name.startswith(prefix) and not ((owner := _owner_of_alias(alias)) and _pid_alive(owner))
    )
    return Leftovers(namespaces, links)


def remove_leftovers(leftovers: Leftovers) -> None:
    """Delete them (a namespace's rules and its end of each veth go with it)."""
    for name in leftovers.namespaces:
        _run(["ip", "netns", "delete", name], check=False)
    for link in leftovers.links:
        _run(["ip", "link", "delete", link], check=False)


def _used_subnets(prefix: str) -> set[int]:
    used = set()
    for name, _ in _links():
        head = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
        if head.isdigit():
            used.add(int(head))
    return used


@dataclass(slots=True)
class _Node:
    namespace: str
    address: str
    link: str
    env: dict[str, str] = field(default_factory=dict)


class NetnsPlacement:
    """One namespace and address per process name, made on first use (`host(name)`).

    Lifecycle: `open()` (makes the bridge) → the launcher asks `host`/`wrapper`/`env` per
    process → `exec(name, argv)` runs a command inside a process's namespace (iptables) →
    `close()` deletes every namespace and link it made, whatever happened in between (stop
    the processes first: a namespace lives on until its last process exits). Thread-safe."""

    private_ports = True

    def __init__(self, prefix: str = PREFIX) -> None:
        if not prefix.startswith(PREFIX):
            raise ValueError(f"namespace prefixes start with {PREFIX!r}")
        self.prefix = prefix
        self.owner = os.getpid()
        self.subnet: int | None = None
        self._nodes: dict[str, _Node] = {}
        self._lock = threading.Lock()
        self._made_links: list[str] = []
        self._made_namespaces: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> NetnsPlacement:
        why = netns_unavailable()
        if why:
            raise ClusterError(why)
        used = _used_subnets(self.prefix)
        free = [n for n in range(MAX_SUBNETS) if n not in used]
        if not free:
            raise ClusterError(f"every 10.77.n.0/24 is taken by {self.prefix} bridges")
        self.subnet = free[0]
        bridge = self.bridge
        self._made_links.append(bridge)
        _run(["ip", "link", "add", bridge, "type", "bridge"])
        _run(["ip", "link", "set", bridge, "alias", f"{ALIAS}{self.owner}"])
        _run(["ip", "addr", "add", f"{self.host_address}/24", "dev", bridge])
        _run(["ip", "link", "set", bridge, "up"])
        return self

    def close(self) -> None:
        """Delete every namespace and link this placement made (idempotent)."""
        with self._lock:
            for namespace in self._made_namespaces:
                _run(["ip", "netns", "delete", namespace], check=False)
            for link in reversed(self._made_links):
                _run(["ip", "link", "delete", link], check=False)
            self._made_namespaces.clear()
            self._made_links.clear()
            self._nodes.clear()

    def remaining(self) -> list[str]:
        """Namespaces and links of this placement that still exist (after `close()`: none)."""
        if self.subnet is None:
            return []
        mine = f"{self.prefix}{self.owner}-{self.subnet}-"
        links = f"{self.prefix}{self.subnet}-"
        found = [n for n in _namespaces() if n.startswith(mine)]
        return found + [name for name, _ in _links() if name.startswith(links)]

    def __enter__(self) -> NetnsPlacement:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- addresses ---------------------------------------------------------------------------

    @property
    def bridge(self) -> str:
        return f"{self.prefix}{self._subnet}-br"

    @property
    def _subnet(self) -> int:
        if self.subnet is None:
            raise ClusterError("the placement is not open")
        return self.subnet

    @property
    def host_address(self) -> str:
        """This machine's own address on the bridge: where the test's clients come from."""
        return f"{SUBNET}.{self._subnet}.1"

    def _node(self, name: str) -> _Node:
        with self._lock:
            node = self._nodes.get(name)
            if node is not None:
                return node
            index = len(self._nodes)
            if index > 250:
                raise ClusterError("at most 250 processes per placement")
            node = _Node(
                namespace=f"{self.prefix}{self.owner}-{self._subnet}-{name}",
                address=f"{SUBNET}.{self._subnet}.{index + 2}",
                link=f"{self.prefix}{self._subnet}-{index}",
            )
            self._make(node)
            self._nodes[name] = node
            return node

    def _make(self, node: _Node) -> None:
        ns = node.namespace
        self._made_namespaces.append(ns)
        _run(["ip", "netns", "add", ns])
        self._made_links.append(node.link)
        _run(["ip", "link", "add", node.link, "type", "veth", "peer", "name", "eth0", "netns", ns])
        _run(["ip", "link", "set", node.link, "alias", f"{ALIAS}{self.owner}"])
        _run(["ip", "link", "set", node.link, "master", self.bridge, "up"])
        _run(["ip", "-n", ns, "addr", "add", f"{node.address}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def host(self, name: str) -> str:
        return self._node(name).address

    def wrapper(self, name: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self._node(name).namespace)

    def env(self, name: str) -> Mapping[str, str]:
        return dict(self._node(name).env)

    def set_env(self, name: str, env: Mapping[str, str]) -> None:
        """Environment for `name`'s next start (e.g. libfaketime's), on top of the cluster's."""
        self._node(name).env = dict(env)

    def namespace(self, name: str) -> str:
        return self._node(name).namespace

    @property
    def names(self) -> list[str]:
        """Every process name placed so far, in the order they were placed."""
        with self._lock:
            return list(self._nodes)

    def address_of(self, name: str) -> str:
        return self._node(name).address

    def exec(self, name: str, argv: Sequence[str], check: bool = True) -> str:
        """Run `argv` inside `name`'s namespace; returns its stdout."""
        done = _run(["ip", "netns", "exec", self._node(name).namespace, *argv], check=check)
        return done.stdout
