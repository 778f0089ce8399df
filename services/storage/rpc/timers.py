"""Request latency of the storage node's data path under Kafka's request names (decision 0033):
`Produce`, and `Fetch` split as Kafka splits it into `FetchConsumer` and `FetchFollower` (a
follower's fetch long-polls for `replica.fetch.wait.max.ms` and would hide the consumers' times),
whichever transport the request came by (gRPC unary or stream, or the zero-copy channel)."""

from __future__ import annotations

from riverlog.common.metrics.rpc import RequestTimer

SERVICE_NAME = "riverlog.v1.StorageService"


class RequestTimers:
    """One set per servicer or zero-copy server; cheap handles on the shared histogram."""

    def __init__(self) -> None:
        self.produce = RequestTimer(SERVICE_NAME, "Produce")
        self._consumer = RequestTimer(SERVICE_NAME, "FetchConsumer")
        self._follower = RequestTimer(SERVICE_NAME, "FetchFollower")

    def fetch(self, replica_id: int | None) -> RequestTimer:
        return self._consumer if replica_id is None else self._follower
