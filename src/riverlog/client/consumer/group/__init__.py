"""Consumer groups on the client: the classic group protocol (join, sync, heartbeat, leave),
the leader's client-side assignment, the rebalance listener and committed offsets.

`coordinator.ConsumerCoordinator` is what `Consumer` drives; `api.GroupApi` is the seam to the
wire (`grpc_api.GatewayGroupApi`), so the group logic is tested against an in-process fake.
"""

from .api import CommittedOffset, ConsumerGroupMetadata, GroupApi, OffsetAndMetadata
from .coordinator import ConsumerCoordinator
from .grpc_api import GatewayGroupApi
from .state import ConsumerRebalanceListener, MemberState

__all__ = [
    "CommittedOffset",
    "ConsumerCoordinator",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "GatewayGroupApi",
    "GroupApi",
    "MemberState",
    "OffsetAndMetadata",
]
