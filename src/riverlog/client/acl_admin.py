"""ACL administration for `AdminClient` (Kafka's Admin createAcls, describeAcls, deleteAcls),
over the gateway's passthrough RPCs (decision 0032).

Bindings and filters are `riverlog.common.acl.model` values (`AclBinding`, `AclBindingFilter`:
None and ANY match anything, PatternType.MATCH every pattern covering a name). A refused
creation (a bad principal, a filter value in a binding) comes back as RiverlogError, raised for
the first by default or returned per binding; the caller needs ALTER on the cluster to create
or delete and DESCRIBE to describe (CLUSTER_AUTHORIZATION_FAILED otherwise).
`AclAdminMixin` needs only the admin client's `_call`. Thread-safe, as the admin client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from riverlog.common.acl.convert import binding_from_proto, binding_to_proto, filter_to_proto
from riverlog.common.acl.model import AclBinding, AclBindingFilter
from riverlog.common.errors import RiverlogError, error_for
from riverlog.v1 import acls_pb2


class AclAdminMixin:
    """Mixed into AdminClient, which provides `_call`."""

    _call: Callable[[Callable[[Any], Any], Any], Any]

    def create_acls(
        self, bindings: Iterable[AclBinding], raise_on_error: bool = True
    ) -> dict[AclBinding, RiverlogError | None]:
        """Create each binding (creating one that exists is not an error); one outcome each."""
        chosen = list(bindings)
        request = acls_pb2.CreateAclsRequest(creations=[binding_to_proto(b) for b in chosen])
        response = self._call(lambda stub: stub.CreateAcls, request)
        outcomes: dict[AclBinding, RiverlogError | None] = {}
        for binding, result in zip(chosen, response.results, strict=False):
            error = (
                error_for(result.error_code, result.error_message) if result.error_code else None
            )
            if error is not None and raise_on_error:
                raise error
            outcomes[binding] = error
        return outcomes

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The bindings matching `acl_filter` (all of them without one)."""
        request = acls_pb2.DescribeAclsRequest(
            filter=filter_to_proto(acl_filter or AclBindingFilter())
        )
        response = self._call(lambda stub: stub.DescribeAcls, request)
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        return [binding_from_proto(b) for b in response.bindings]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every binding each filter matches; the deleted bindings, per filter."""
        request = acls_pb2.DeleteAclsRequest(filters=[filter_to_proto(f) for f in filters])
        response = self._call(lambda stub: stub.DeleteAcls, request)
        out: list[list[AclBinding]] = []
        for result in response.filter_results:
            if result.error_code:
                raise error_for(result.error_code, result.error_message)
            out.append([binding_from_proto(b) for b in result.matching_acls])
        return out
