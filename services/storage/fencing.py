"""Self-fencing of a storage node whose cluster membership may have lapsed (issue 3, zombies).

A node paused (SIGSTOP, a long GC-like stall, a network partition) past its lease has been
declared dead by the controller, which moved leadership of its partitions elsewhere at a newer
leader epoch. When it resumes, requests already queued on its sockets would still find it
"leader" in its stale image. So a node takes writes as leader only while

- its last successful heartbeat (or registration) was sent less than the lease TTL ago — the
  controller cannot have expired a lease renewed that recently, and
- after every re-registration, it has applied an image newer than the one it held when it
  registered again (that image holds whatever the controller decided while it was away; the
  Watch stream is in version order).

Otherwise produce is refused with NOT_LEADER_OR_FOLLOWER and ISR changes are not asked for;
fetches of committed data stay served. Kafka's brokers fence themselves the same way (a broker
whose heartbeats lapse is fenced by the controller and stops acting on its stale metadata).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Lease(Protocol):
    """What the fence reads of a MembershipSession."""

    renewed_monotonic: float

    @property
    def lease_ttl_ms(self) -> int: ...


class SelfFence:
    """`may_lead()` is called on every produce (event-loop thread); cheap."""

    def __init__(
        self,
        image_version: Callable[[], int],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._image_version = image_version
        self._monotonic = monotonic
        self._lease: Lease | None = None
        self._required_version = -1
        self._registrations_seen_by_callback = 0
        self._fenced_logged = False

    def attach(self, lease: Lease) -> None:
        self._lease = lease

    def on_registered(self, *_registration: object) -> None:
        """MembershipSession's `on_registered` callback: every registration after the first
        means the lease had lapsed; from then on writes wait for an image newer than the one
        held now (the moment of registering, not of the next produce: images applied in
        between may predate the registration's own)."""
        self._registrations_seen_by_callback += 1
        if self._registrations_seen_by_callback > 1:
            self._required_version = self._image_version() + 1
            log.warning(
                "registered again after the lease lapsed; refusing writes until the image "
                "passes version %d",
                self._required_version - 1,
            )

    def may_lead(self) -> bool:
        lease = self._lease
        if lease is None:
            return True  # not registered yet: the controller has named no leader here
        ttl_s = max(lease.lease_ttl_ms, 1) / 1000.0
        expired = self._monotonic() - lease.renewed_monotonic > ttl_s
        stale = self._image_version() < self._required_version
        fenced = expired or stale
        if fenced != self._fenced_logged:
            self._fenced_logged = fenced
            if fenced:
                log.warning(
                    "self-fenced: lease %s, image %s",
                    "expired" if expired else "ok",
                    "stale" if stale else "current",
                )
            else:
                log.info("no longer fenced")
        return not fenced
