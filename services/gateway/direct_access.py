"""GrantDataAccess (decision 0047): a caller's grant to send fetch or produce frames straight to
one storage node's direct port, instead of through this gateway.

The gateway stays the control plane: the call was authenticated and charged the request quota
like any other (the interceptors), and here the grant is checked and paid for before it is
signed: every topic named must be a valid name the caller may READ (fetch) or WRITE (produce;
never an internal topic), the node must be a live storage node with a direct port, and the
grant's bytes are charged to the caller's fetch or produce byte-rate quota at once (capped at
one quota sample's worth), the throttle time returned for the client to wait before using it.
The call is never held: a caller the quota holds back, or whom the grant would take over the
bound (the bytes are then taken back, as an over-quota fetch's), gets no grant (an empty one,
error NONE) and the throttle time, and asks again after it.
The grant names the node, the operation, the topics, the caller (principal, client id), the
bytes and the expiry (`direct.access.grant.bytes`, `direct.access.grant.ms`), signed with the
cluster's direct-access key; the node checks the rest.

Without a key, or on a TLS gateway (the direct port is plaintext), every call is answered
DELEGATION_TOKEN_AUTH_DISABLED: the client keeps using the gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from riverlog.common.acl.model import AclOperation, ResourceType
from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import GrantOperation, new_grant, sign_grant
from riverlog.common.quota.entity import QuotaType

from .authorization import GatewayAuthorizer, denied
from .config import GatewayConfig
from .context import RequestContext
from .quotas import GatewayQuotas
from .routing.metadata_cache import STORAGE, MetadataCache
from .validation import internal_topic_error, topic_error

log = logging.getLogger(__name__)

_ACL = {GrantOperation.READ: AclOperation.READ, GrantOperation.WRITE: AclOperation.WRITE}
_QUOTA = {GrantOperation.READ: QuotaType.FETCH, GrantOperation.WRITE: QuotaType.PRODUCE}


@dataclass(frozen=True, slots=True)
class IssuedGrant:
    """What GrantDataAccess answers with."""

    grant: bytes
    expires_at_ms: int
    byte_budget: int
    throttle_time_ms: int
    host: str
    direct_port: int
    lifetime_ms: int  # expires_at_ms less the issue time (clients count it on their clock)


class DataAccess:
    """One per gateway; event loop only."""

    def __init__(
        self,
        config: GatewayConfig,
        cache: MetadataCache,
        key: bytes | None,
        quotas: GatewayQuotas | None = None,
        authz: GatewayAuthorizer | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._config = config
        self._cache = cache
        self._key = key if not config.tls else None
        self._quotas = quotas
        self._authz = authz
        self._clock = clock
        self.issued = 0

    @property
    def enabled(self) -> bool:
        return self._key is not None

    async def grant(
        self,
        ctx: RequestContext,
        operation: GrantOperation | None,
        topics: Sequence[str],
        node_id: int,
    ) -> IssuedGrant:
        """A signed grant, or RiverlogError: DELEGATION_TOKEN_AUTH_DISABLED (no direct access
        here), INVALID_REQUEST / INVALID_TOPIC_EXCEPTION (a bad request),
        TOPIC_AUTHORIZATION_FAILED (a topic refused: nothing granted), UNKNOWN_NODE."""
        key = self._key
        if key is None:
            raise RiverlogError(
                "this cluster offers no direct data access: use the gateway",
                ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
            )
        if operation is None:
            raise RiverlogError("the operation must be READ or WRITE", ErrorCode.INVALID_REQUEST)
        names = frozenset(topics)
        if not names:
            raise RiverlogError("a grant names at least one topic", ErrorCode.INVALID_REQUEST)
        for name in sorted(names):
            error = topic_error(name)
            if error is None and operation == GrantOperation.WRITE:
                error = internal_topic_error(name, "append to")
            if error is not None:
                raise error
        self._authorize(ctx, operation, names)
        node = self._cache.image.nodes.get((STORAGE, node_id))
        if node is None:
            raise RiverlogError(f"no live storage node {node_id}", ErrorCode.UNKNOWN_NODE)
        if node.direct_port <= 0:
            raise RiverlogError(
                f"storage node {node_id} has no direct port: use the gateway",
                ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
            )
        budget = self._config.direct_access_grant_bytes
        lifetime_ms = self._config.direct_access_grant_ms
        throttle = 0
        if self._quotas is not None:
            throttle, budget = self._quotas.judge_grant(ctx, _QUOTA[operation], budget)
            if budget <= 0:  # the quota holds the caller back: nothing granted, not held
                return IssuedGrant(b"", 0, 0, throttle, node.host, node.direct_port, 0)
        grant = new_grant(
            node_id=node_id,
            operation=operation,
            principal=ctx.principal,
            client_id=ctx.client_id,
            topics=names,
            byte_budget=budget,
            now_ms=self._clock.time_ms(),
            lifetime_ms=lifetime_ms,
        )
        signed = sign_grant(grant, key)
        self.issued += 1
        return IssuedGrant(
            grant=signed,
            expires_at_ms=grant.expires_at_ms,
            byte_budget=budget,
            throttle_time_ms=throttle,
            host=node.host,
            direct_port=node.direct_port,
            lifetime_ms=lifetime_ms,
        )

    def _authorize(
        self, ctx: RequestContext, operation: GrantOperation, names: frozenset[str]
    ) -> None:
        authz = self._authz
        if authz is None or not authz.active:
            return
        acl = _ACL[operation]
        refused = sorted(n for n in names if not authz.allowed(ctx, acl, ResourceType.TOPIC, n))
        if refused:
            error = denied(ctx, acl, ResourceType.TOPIC, refused[0])
            if len(refused) > 1:
                error = RiverlogError(
                    f"{error.message} (and {len(refused) - 1} more: {', '.join(refused[1:])})",
                    error.code,
                )
            raise error
