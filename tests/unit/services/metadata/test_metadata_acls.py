"""ACL RPCs of the metadata service over an in-memory etcd: creates and deletes go through the
controller's fenced write (a deposed controller writes nothing), bad bindings are refused one
by one and change nothing, describe filters, and the quota watch stream carries the bindings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from test_metadata_client_quotas import MemoryStore

from riverlog.common.acl.convert import binding_to_proto, filter_to_proto
from riverlog.common.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.client_quotas import ClientQuotaBook
from riverlog.services.metadata.controller.acls import AclController
from riverlog.services.metadata.rpc.acls import AclsRpc
from riverlog.services.metadata.rpc.client_quotas import ClientQuotasRpc
from riverlog.services.metadata.store import Compare, Op
from riverlog.v1 import acls_pb2, metadata_pb2


class FakeElection:
    """`ControllerElection.write` over the memory store; `deposed` makes it fail as a
    fenced write does."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.deposed = False
        self.writes = 0

    async def write(self, compares: Sequence[Compare], ops: Sequence[Op]) -> int | None:
        if self.deposed:
            raise RiverlogError("no longer the controller", ErrorCode.STALE_CONTROLLER_EPOCH)
        self.writes += 1
        return await self.store.txn(compares, ops)


def binding(name: str, principal: str = "User:alice", pattern=PatternType.LITERAL) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, pattern),
        AccessControlEntry(principal, "*", AclOperation.READ, AclPermission.ALLOW),
    )


async def build() -> tuple[AclsRpc, ClientQuotaBook, FakeElection]:
    store = MemoryStore()
    book = ClientQuotaBook(store)  # type: ignore[arg-type]
    await book.start()
    election = FakeElection(store)
    rpc = AclsRpc(AclController(election, book), book.acls)  # type: ignore[arg-type]
    return rpc, book, election


def create(*bindings: acls_pb2.AclBinding) -> acls_pb2.CreateAclsRequest:
    return acls_pb2.CreateAclsRequest(creations=list(bindings))


def describe(rpc: AclsRpc, f: AclBindingFilter | None = None) -> list[str]:
    answer = rpc.describe(
        acls_pb2.DescribeAclsRequest(filter=filter_to_proto(f or AclBindingFilter()))
    )
    return sorted(f"{b.resource_name}:{b.principal}" for b in answer.bindings)


def test_create_describe_delete() -> None:
    async def scenario() -> None:
        rpc, _, _ = await build()
        bad = binding_to_proto(binding("x"))
        bad.principal = "alice"  # not User:alice
        created = await rpc.create(
            create(
                binding_to_proto(binding("a")),
                bad,
                binding_to_proto(binding("b-", pattern=PatternType.PREFIXED)),
            )
        )
        codes = [r.error_code for r in created.results]
        assert codes == [0, ErrorCode.INVALID_REQUEST, 0]
        assert "User:<name>" in created.results[1].error_message
        assert describe(rpc) == ["a:User:alice", "b-:User:alice"]
        matching = AclBindingFilter(ResourceType.TOPIC, "b-x", PatternType.MATCH)
        assert describe(rpc, matching) == ["b-:User:alice"]
        again = await rpc.create(create(binding_to_proto(binding("a"))))
        assert [r.error_code for r in again.results] == [0]  # already there: not an error
        assert describe(rpc) == ["a:User:alice", "b-:User:alice"]
        deleted = await rpc.delete(
            acls_pb2.DeleteAclsRequest(
                filters=[
                    filter_to_proto(AclBindingFilter(name="a")),
                    filter_to_proto(AclBindingFilter(name="zzz")),
                ]
            )
        )
        assert [len(r.matching_acls) for r in deleted.filter_results] == [1, 0]
        assert describe(rpc) == ["b-:User:alice"]

    asyncio.run(scenario())


def test_a_deposed_controller_writes_nothing() -> None:
    async def scenario() -> None:
        rpc, book, election = await build()
        election.deposed = True
        try:
            await rpc.create(create(binding_to_proto(binding("a"))))
        except RiverlogError as exc:
            assert exc.code == ErrorCode.STALE_CONTROLLER_EPOCH
        else:
            raise AssertionError("a fenced write must fail")
        assert describe(rpc) == [] and book.acls.patterns == {}

    asyncio.run(scenario())


def test_only_invalid_bindings_write_nothing() -> None:
    async def scenario() -> None:
        rpc, _, election = await build()
        star = binding_to_proto(binding("*", pattern=PatternType.PREFIXED))
        created = await rpc.create(create(star))
        assert [r.error_code for r in created.results] == [ErrorCode.INVALID_REQUEST]
        assert election.writes == 0

    asyncio.run(scenario())


class Servicer(ClientQuotasRpc):
    def __init__(self, book: ClientQuotaBook) -> None:
        self.client_quotas = book


def test_the_quota_watch_stream_carries_the_bindings() -> None:
    async def scenario() -> None:
        rpc, book, _ = await build()
        stream = Servicer(book).WatchClientQuotas(metadata_pb2.WatchClientQuotasRequest(), None)
        first = await anext(stream)
        assert list(first.acls) == []
        following = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        await rpc.create(create(binding_to_proto(binding("a"))))
        second = await asyncio.wait_for(following, 1)
        assert [b.resource_name for b in second.acls] == ["a"]
        await stream.aclose()

    asyncio.run(scenario())
