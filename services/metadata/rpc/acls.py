"""The ACL RPCs of the MetadataService (CreateAcls, DescribeAcls, DeleteAcls): thin
conversions around `AclController` (writes, on the controller) and the client-quota book's
table (reads, on any instance). The servicer owns one and routes writes to the controller."""

from __future__ import annotations

from riverlog.common.acl.convert import (
    binding_from_proto,
    binding_to_proto,
    filter_from_proto,
)
from riverlog.common.acl.model import AclBinding
from riverlog.common.errors import RiverlogError
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.v1 import acls_pb2

from ..acl_records import AclTable
from ..controller.acls import AclController


class AclsRpc:
    """One per instance, owned by `MetadataServicer`; called on the event loop."""

    def __init__(self, controller: AclController, table: AclTable) -> None:
        self.controller = controller
        self.table = table

    async def create(self, request: acls_pb2.CreateAclsRequest) -> acls_pb2.CreateAclsResponse:
        out = acls_pb2.CreateAclsResponse()
        parsed: list[AclBinding] = []
        slots: list[int] = []
        for i, creation in enumerate(request.creations):
            result = out.results.add()
            try:
                parsed.append(binding_from_proto(creation))
                slots.append(i)
            except RiverlogError as exc:
                result.error_code = error_code_to_proto(exc.code)
                result.error_message = exc.message
        outcomes = await self.controller.create(parsed)
        for i, outcome in zip(slots, outcomes, strict=True):
            if outcome is not None:
                out.results[i].error_code = error_code_to_proto(outcome.code)
                out.results[i].error_message = outcome.message
        return out

    def describe(self, request: acls_pb2.DescribeAclsRequest) -> acls_pb2.DescribeAclsResponse:
        try:
            f = filter_from_proto(request.filter)
        except RiverlogError as exc:
            return acls_pb2.DescribeAclsResponse(
                error_code=error_code_to_proto(exc.code), error_message=exc.message
            )
        chosen = sorted((b for b in self.table.bindings() if f.matches(b)), key=str)
        return acls_pb2.DescribeAclsResponse(bindings=[binding_to_proto(b) for b in chosen])

    async def delete(self, request: acls_pb2.DeleteAclsRequest) -> acls_pb2.DeleteAclsResponse:
        out = acls_pb2.DeleteAclsResponse()
        try:
            filters = [filter_from_proto(f) for f in request.filters]
        except RiverlogError as exc:
            for _ in request.filters:
                out.filter_results.add(
                    error_code=error_code_to_proto(exc.code), error_message=exc.message
                )
            return out
        for deleted in await self.controller.delete(filters):
            out.filter_results.add(matching_acls=[binding_to_proto(b) for b in deleted])
        return out
