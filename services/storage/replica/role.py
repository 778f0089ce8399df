"""A hosted replica's role in its partition (leader, follower or offline), in a module of its own
so that the partition and the leader-side replication code it is assembled from can both name it
without importing each other.
"""

from __future__ import annotations

import enum

from riverlog.common.types import NO_LEADER

__all__ = ["NO_LEADER", "Role"]


class Role(enum.Enum):
    """This node's part in a partition, computed from the image's leader and replicas."""

    LEADER = "leader"
    """action: takes appends, serves fetches, moves the high watermark.
    transition: to FOLLOWER or OFFLINE when an image with a newer epoch names another leader."""
    FOLLOWER = "follower"
    """action: (with replication) pulls from the leader; refuses produce and consumer fetch.
    transition: to LEADER when an image names this node leader at a newer epoch."""
    OFFLINE = "offline"
    """action: refuses everything with NOT_LEADER_OR_FOLLOWER (the partition has no leader).
    transition: to LEADER or FOLLOWER when a leader is elected."""
