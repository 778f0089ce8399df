"""The gateway's authorizer: Kafka's ACL decision for the caller of a request, in memory.

The bindings arrive with the quota/user image (`ClientQuotaWatcher.add_acl_listener`); each
change builds a new `Authorizer` (index and decision cache) and swaps it in, so a decision on
the produce or fetch path is a dict lookup (cached) or a few (the index), never a network hop.
The caller's principal is Kafka's `User:<name>` of the authenticated user (`User:ANONYMOUS`
without credentials), its host the address the call came from.

Dormant (everything allowed, as before ACLs existed) while `authorizer.enable` is false or the
cluster holds no binding at all (decision 0032); `active` tells callers they may skip work.
Until the first image arrives the gateway cannot know whether bindings exist, so it fails
closed: only super users are allowed (as a Kafka broker serves nobody before its authorizer
loaded the ACLs); the first image, with or without bindings, ends that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Final, TypeVar

from riverlog.common.acl.authorizer import AclIndex, Authorizer
from riverlog.common.acl.model import CLUSTER_NAME, AclOperation, ResourceType, principal_of
from riverlog.common.errors import ErrorCode, RiverlogError

from .config import GatewayConfig
from .context import RequestContext

log = logging.getLogger(__name__)

_T = TypeVar("_T")

DENIED_CODE: Final = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def peer_host(peer: str) -> str:
    """The host part of a gRPC peer string (`ipv4:127.0.0.1:5555`, `ipv6:[::1]:5555`)."""
    _, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0] or rest
    return host.strip("[]")


def denied(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> RiverlogError:
    """Kafka's error for a refused operation on a resource of `resource_type`."""
    what = (
        "the cluster" if resource_type == ResourceType.CLUSTER else f"{resource_type.name} {name!r}"
    )
    return RiverlogError(
        f"User:{ctx.principal} is not authorized to {operation.name} {what}",
        DENIED_CODE[resource_type],
    )


class GatewayAuthorizer:
    """One per gateway; `update` runs on the event loop (the quota watch's task), the checks
    on the request tasks of the same loop."""

    def __init__(self, config: GatewayConfig) -> None:
        self.enabled = config.authorizer_enable
        self.super_users = config.super_user_list
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self._authorizer: Authorizer | None = None
        if self.enabled:  # closed until the first image says what the bindings are
            self._authorizer = Authorizer(AclIndex(), self.super_users, allow_if_no_acl=False)

    @property
    def active(self) -> bool:
        return self._authorizer is not None

    def update(self, index: AclIndex) -> None:
        if not self.enabled or len(index) == 0:
            self._authorizer = None
        else:
            self._authorizer = Authorizer(index, self.super_users, self.allow_if_no_acl)
        log.info(
            "ACLs: %d bindings, authorization %s",
            len(index),
            "enforced" if self.active else "dormant",
        )

    def allowed(
        self, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        a = self._authorizer
        if a is None:
            return True
        return a.authorize(
            principal_of(ctx.principal), peer_host(ctx.peer), operation, resource_type, name
        )

    def allowed_any(
        self, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        a = self._authorizer
        if a is None:
            return True
        return a.authorize_any(
            principal_of(ctx.principal), peer_host(ctx.peer), operation, resource_type
        )

    def require(
        self, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> None:
        """RiverlogError with Kafka's *_AUTHORIZATION_FAILED code when refused."""
        if not self.allowed(ctx, operation, resource_type, name):
            raise denied(ctx, operation, resource_type, name)

    def require_cluster(self, ctx: RequestContext, operation: AclOperation) -> None:
        self.require(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_create_topic(self, ctx: RequestContext, name: str) -> bool:
        """Kafka's CreateTopics check: CREATE on the cluster or on the topic."""
        return self.allowed(
            ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME
        ) or self.allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)

    def may_write_idempotently(self, ctx: RequestContext) -> bool:
        """Kafka 3.x's InitProducerId check without a transactional id: IDEMPOTENT_WRITE on
        the cluster, or WRITE on any topic."""
        return self.allowed(
            ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME
        ) or self.allowed_any(ctx, AclOperation.WRITE, ResourceType.TOPIC)

    def split(
        self,
        ctx: RequestContext,
        operation: AclOperation,
        items: Iterable[_T],
        topic_of: Callable[[_T], str],
    ) -> tuple[list[_T], list[_T]]:
        """(allowed, refused) items by `operation` on each item's topic, in order."""
        allowed: list[_T] = []
        refused: list[_T] = []
        for item in items:
            ok = self.allowed(ctx, operation, ResourceType.TOPIC, topic_of(item))
            (allowed if ok else refused).append(item)
        return allowed, refused
