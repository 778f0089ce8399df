"""The quota, authentication and authorization components of one gateway, wired together.

Three things follow the cluster: the users, quota configs and ACL bindings (one
WatchClientQuotas stream: `ClientQuotaWatcher`, whose every image swaps the resolver of the
local view and the user table of the authenticator, and whose ACL bindings swap the index of
the authorizer), the local measurement (`LocalQuotaView` behind `GatewayQuotas`, on the
request path), and the background exchange with the quota service (`QuotaReporter`). Start-up
waits briefly for the first quota image so a restarted gateway does not serve a throttled client
unthrottled, but never fails on it: with no image yet, no quota applies, no ACL is enforced and
only ANONYMOUS calls are served (credentials cannot be checked), which the log says. The watcher
and the reporter are gRPC clients: the app makes them (`client_quota_watcher`, `peers/quota.py`)
and hands them in, so this module stays free of transport code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from riverlog.common.acl.authorizer import AclIndex
from riverlog.common.clock import Clock, SystemClock
from riverlog.common.quota.credentials import CredentialChecker, StoredCredential
from riverlog.common.quota.exchange import LocalQuotaView
from riverlog.common.quota.resolver import QuotaResolver
from riverlog.common.quota.window import WindowConfig

from .auth import Authenticator
from .authorization import GatewayAuthorizer
from .config import GatewayConfig
from .quotas import GatewayQuotas

log = logging.getLogger(__name__)

_FIRST_IMAGE_TIMEOUT_S = 10.0
_HOLD_RECHECK_MS = 10
"""A held request looks again this often: the answer that ends a hold may come any time."""


QuotaListener = Callable[[QuotaResolver, dict[str, StoredCredential]], None]


class QuotaFeed(Protocol):
    """What enforcement needs of `ClientQuotaWatcher` (the WatchClientQuotas stream)."""

    @property
    def version(self) -> int: ...

    def add_listener(self, callback: QuotaListener) -> None: ...

    def add_acl_listener(self, callback: Callable[[AclIndex], None]) -> None: ...

    async def start(self, timeout_s: float) -> bool: ...

    async def stop(self) -> None: ...


class Reporter(Protocol):
    """What enforcement needs of `peers.quota.QuotaReporter` (the background exchange)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


class Enforcement:
    """Lifecycle: built with the gateway; `await start()` once the metadata snapshot is in,
    `await stop()` at shutdown. Everything runs on the gateway's event loop."""

    def __init__(
        self,
        config: GatewayConfig,
        node_id: int,
        watcher: QuotaFeed,
        reporter: Callable[[LocalQuotaView, Clock, int], Reporter],
        clock: Clock | None = None,
    ) -> None:
        """`reporter(view, clock, interval_ms)` makes the background reporter of the view."""
        self.clock = clock or SystemClock()
        window = WindowConfig.from_kafka(config.quota_window_num, config.quota_window_size_seconds)
        gateway_id = f"gateway-{node_id}-{time.time_ns()}"
        interval = config.quota_report_interval_ms
        self.view = LocalQuotaView(
            gateway_id, QuotaResolver(), self.clock, window, report_interval_ms=interval
        )
        self.quotas = GatewayQuotas(self.view, self.clock, _HOLD_RECHECK_MS)
        self.auth = Authenticator(CredentialChecker(), config.allow_anonymous)
        self.authz = GatewayAuthorizer(config)
        self.watcher = watcher
        self.watcher.add_listener(self._on_image)
        self.watcher.add_acl_listener(self.authz.update)
        self.reporter = reporter(self.view, self.clock, interval)

    def _on_image(self, resolver: QuotaResolver, users: dict[str, StoredCredential]) -> None:
        self.quotas.update_resolver(resolver)
        self.auth.checker.update(users)
        log.info(
            "quota configs version %d: %d entities, %d users",
            self.watcher.version,
            len(resolver),
            len(users),
        )

    async def start(self) -> None:
        if not await self.watcher.start(_FIRST_IMAGE_TIMEOUT_S):
            log.warning(
                "no quota/user image from the metadata service yet: no quotas apply and"
                " credentials cannot be checked until it arrives"
            )
        self.reporter.start()

    async def stop(self) -> None:
        await self.reporter.stop()
        await self.watcher.stop()
