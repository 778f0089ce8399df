"""The QuotaService servicer: a gateway's usage report in, this instance's answer out.

Thin: convert the report, merge it into the ledger (which sums every gateway's deltas into the
cluster-wide windows, judges, and shares the headroom), convert the answer with each hold as
its remaining time, since clocks are per process. A malformed report is answered with its error
code and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc

from riverlog.common.clock import Clock
from riverlog.common.errors import RiverlogError
from riverlog.common.quota.convert import answer_to_proto, handover_from_proto, report_from_proto
from riverlog.v1 import quota_pb2, quota_pb2_grpc

from ..ledger import QuotaLedger

log = logging.getLogger(__name__)

SERVICE_NAME = "riverlog.v1.QuotaService"


class QuotaServicer(quota_pb2_grpc.QuotaServiceServicer):
    """One per process; grpc calls it on the event loop, which also owns the ledger."""

    def __init__(
        self,
        ledger: QuotaLedger,
        clock: Clock,
        on_peer_leaving: Callable[[int, int], None] = lambda _node_id, _incarnation: None,
    ) -> None:
        self.ledger = ledger
        self.clock = clock
        self.on_peer_leaving = on_peer_leaving
        self.reports = 0

    async def ReportUsage(
        self, request: quota_pb2.ReportUsageRequest, context: grpc.aio.ServicerContext
    ) -> quota_pb2.ReportUsageResponse:
        try:
            report = report_from_proto(request)
        except RiverlogError as exc:
            return quota_pb2.ReportUsageResponse(
                error_code=int(exc.code),  # type: ignore[arg-type]
                error_message=exc.message,
            )
        now = self.clock.monotonic_ms()
        answer = self.ledger.merge(report, now)
        self.reports += 1
        return answer_to_proto(answer, now)

    async def HandOverWindows(
        self, request: quota_pb2.HandOverWindowsRequest, context: grpc.aio.ServicerContext
    ) -> quota_pb2.HandOverWindowsResponse:
        try:
            handover = handover_from_proto(request)
        except RiverlogError as exc:
            return quota_pb2.HandOverWindowsResponse(
                error_code=int(exc.code),  # type: ignore[arg-type]
                error_message=exc.message,
            )
        if handover.leaving:
            self.on_peer_leaving(handover.from_node_id, handover.from_incarnation)
        self.ledger.absorb(list(handover.windows), self.clock.monotonic_ms())
        log.info(
            "took %d quota windows from instance %d%s",
            len(handover.windows),
            handover.from_node_id,
            " (leaving)" if handover.leaving else "",
        )
        return quota_pb2.HandOverWindowsResponse()


def add_to_server(servicer: QuotaServicer, server: grpc.aio.Server) -> None:
    quota_pb2_grpc.add_QuotaServiceServicer_to_server(servicer, server)
