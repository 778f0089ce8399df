"""Where each process of a local cluster runs on this machine: the address it binds and
advertises, the command it runs under, and environment it gets on top of the cluster's.

The default, `Loopback`, is what every cluster had so far: every process on 127.0.0.1, run
directly. Fault tests pass another placement (`riverlog.cluster.netns.NetnsPlacement`: one
network namespace and private address per process, run under `ip netns exec`) so that one
process can be cut off from the others. A placement never changes a service's command line
beyond `--host`, so a cluster behaves the same wherever it is placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .readiness import HOST


class Placement(Protocol):
    """Per-process host, command wrapper and environment, asked once per process name
    (`etcd`, `metadata-1`, `storage-2`, ...) when the launcher builds its command line."""

    @property
    def private_ports(self) -> bool:
        """True when every process has an address of its own, so fixed ports (etcd's 2379
        and 2380) are free on it; False on a shared address, where free ports are found."""
        ...

    def host(self, name: str) -> str:
        """The address `name` binds and advertises."""
        ...

    def wrapper(self, name: str) -> tuple[str, ...]:
        """An argv prefix `name` runs under (empty: run directly). The wrapper must exec the
        command, so the PID the launcher records is the service's own."""
        ...

    def env(self, name: str) -> Mapping[str, str]:
        """Environment added for `name` only (over the cluster's `env`)."""
        ...


class Loopback:
    """Every process on 127.0.0.1, run directly: the launcher's default."""

    private_ports = False

    def host(self, name: str) -> str:
        return HOST

    def wrapper(self, name: str) -> tuple[str, ...]:
        return ()

    def env(self, name: str) -> Mapping[str, str]:
        return {}


LOOPBACK = Loopback()
