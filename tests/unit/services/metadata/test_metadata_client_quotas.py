"""Client quotas and users in the metadata service, through its RPC handlers over an in-memory
etcd: validation (negative values, unknown keys and entity types, unknown users), salted
credentials, Kafka's describe filters, and the watch stream that publishes every change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from riverlog.common.errors import ErrorCode
from riverlog.common.quota.convert import image_from_proto
from riverlog.common.quota.credentials import new_token, token_slot
from riverlog.services.metadata.client_quotas import ClientQuotaBook
from riverlog.services.metadata.rpc.client_quotas import ClientQuotasRpc
from riverlog.services.metadata.store import Change, Compare, Entry, Keys, Op
from riverlog.v1 import admin_pb2, metadata_pb2

Match = admin_pb2.DescribeClientQuotasRequest


class MemoryStore:
    """The slice of EtcdStore the book uses: read_all, get, txn (mod-revision compares), and a
    watch that calls back synchronously."""

    def __init__(self) -> None:
        self.keys = Keys("/riverlog/client/")
        self.data: dict[str, Entry] = {}
        self.revision = 1
        self.callback: Callable[[int, list[Change] | None], None] | None = None

    async def read_all(self) -> tuple[int, dict[str, Entry]]:
        return self.revision, dict(self.data)

    async def watch(self, start: int, callback: Callable[[int, list[Change] | None], None]):
        self.callback = callback

    def cancel_watch(self) -> None:
        self.callback = None

    async def get(self, key: str) -> Entry | None:
        return self.data.get(key)

    async def txn(self, compares: Sequence[Compare], ops: Sequence[Op]) -> int | None:
        for c in compares:
            current = self.data.get(c.key)
            if (current.mod_revision if current else 0) != c.mod_revision:
                return None
        self.revision += 1
        changes = []
        for op in ops:
            if op.value is None:
                self.data.pop(op.key, None)
            else:
                self.data[op.key] = Entry(op.value, self.revision, 0)
            changes.append(Change(op.key, op.value, self.revision, 0))
        if self.callback is not None:
            self.callback(self.revision, changes)
        return self.revision


class Servicer(ClientQuotasRpc):
    def __init__(self, book: ClientQuotaBook) -> None:
        self.client_quotas = book


def entity(**parts: str | None) -> admin_pb2.ClientQuotaEntity:
    out = admin_pb2.ClientQuotaEntity()
    for entity_type, name in parts.items():
        component = out.components.add(entity_type=entity_type.replace("_", "-"))
        if name is not None:
            component.name = name
    return out


def alter(*entries: tuple[admin_pb2.ClientQuotaEntity, dict[str, float | None]]):
    request = admin_pb2.AlterClientQuotasRequest()
    for ent, values in entries:
        entry = request.entries.add()
        entry.entity.CopyFrom(ent)
        for key, value in values.items():
            entry.ops.add(key=key, value=value or 0.0, remove=value is None)
    return request


@pytest.fixture
def servicer():
    async def build() -> tuple[Servicer, ClientQuotaBook]:
        book = ClientQuotaBook(MemoryStore())  # type: ignore[arg-type]
        await book.start()
        return Servicer(book), book

    return build


def run(coro):
    return asyncio.run(coro)


def test_set_describe_and_remove_quotas(servicer) -> None:
    async def scenario() -> None:
        s, book = await servicer()
        await s.UpsertUser(admin_pb2.UpsertUserRequest(name="alice", password="pw"), None)
        response = await s.AlterClientQuotas(
            alter(
                (entity(user="alice"), {"producer_byte_rate": 1e6}),
                (entity(user=None, client_id="app"), {"consumer_byte_rate": 2e6}),
                (entity(client_id=None), {"request_percentage": 50}),
            ),
            None,
        )
        assert [r.error_code for r in response.results] == [0, 0, 0]
        paths = sorted(e.path for e in book.configs)
        assert paths == [
            "/config/clients/<default>",
            "/config/users/<default>/clients/app",
            "/config/users/alice",
        ]
        everything = await s.DescribeClientQuotas(Match(), None)
        assert len(everything.entries) == 3
        only_alice = await s.DescribeClientQuotas(
            Match(components=[Match.Component(entity_type="user", match="alice")]), None
        )
        assert [dict(e.values) for e in only_alice.entries] == [{"producer_byte_rate": 1e6}]
        defaults = Match(
            components=[Match.Component(entity_type="client-id", match_type=Match.MATCH_DEFAULT)],
            strict=True,
        )
        assert [dict(e.values) for e in (await s.DescribeClientQuotas(defaults, None)).entries] == [
            {"request_percentage": 50}
        ]
        removed = await s.AlterClientQuotas(
            alter((entity(user="alice"), {"producer_byte_rate": None})), None
        )
        assert removed.results[0].error_code == 0
        assert "/config/users/alice" not in {e.path for e in book.configs}

    run(scenario())


@pytest.mark.parametrize(
    ("values", "code", "text"),
    [
        ({"producer_byte_rate": -1}, ErrorCode.INVALID_CONFIG, "must be a whole number"),
        ({"consumer_byte_rate": 0}, ErrorCode.INVALID_CONFIG, "above 0"),
        ({"request_percentage": float("inf")}, ErrorCode.INVALID_CONFIG, "percentage"),
        ({"producer_byte_rate": 10.5}, ErrorCode.INVALID_CONFIG, "whole number"),
        ({"producer.byte.rate": 10}, ErrorCode.INVALID_REQUEST, "unknown quota key"),
        ({"bogus": None}, ErrorCode.INVALID_REQUEST, "unknown quota key"),
    ],
)
def test_bad_values_and_keys_are_refused_per_entity(servicer, values, code, text) -> None:
    async def scenario() -> None:
        s, book = await servicer()
        response = await s.AlterClientQuotas(
            alter(
                (entity(client_id="x"), values), (entity(client_id="y"), {"request_percentage": 5})
            ),
            None,
        )
        first, second = response.results
        assert first.error_code == code and text in first.error_message
        assert "/config/clients/x" in first.error_message
        assert second.error_code == 0  # one bad entity does not fail the others
        assert {e.path for e in book.configs} == {"/config/clients/y"}

    run(scenario())


def test_unknown_users_and_entity_types_are_refused(servicer) -> None:
    async def scenario() -> None:
        s, book = await servicer()
        response = await s.AlterClientQuotas(
            alter(
                (entity(user="ghost"), {"producer_byte_rate": 10}),
                (entity(user="ANONYMOUS"), {"producer_byte_rate": 10}),
                (entity(user=None), {"producer_byte_rate": 10}),
            ),
            None,
        )
        codes = [r.error_code for r in response.results]
        assert codes == [ErrorCode.INVALID_REQUEST, 0, 0]
        assert "unknown user 'ghost'" in response.results[0].error_message
        odd = admin_pb2.AlterClientQuotasRequest()
        odd.entries.add().entity.components.add(entity_type="ip", name="1.2.3.4")
        bad_type = await s.AlterClientQuotas(odd, None)
        assert bad_type.results[0].error_code == ErrorCode.INVALID_REQUEST
        assert "unknown quota entity type 'ip'" in bad_type.results[0].error_message
        validate = alter((entity(client_id="v"), {"producer_byte_rate": 10}))
        validate.validate_only = True
        assert (await s.AlterClientQuotas(validate, None)).results[0].error_code == 0
        assert "/config/clients/v" not in {e.path for e in book.configs}

    run(scenario())


def test_users_are_stored_hashed_and_listed(servicer) -> None:
    async def scenario() -> None:
        s, book = await servicer()
        ok = await s.UpsertUser(admin_pb2.UpsertUserRequest(name="bob", password="hunter2"), None)
        assert ok.error_code == 0
        raw = book.store.data["/riverlog/client/users/bob"].value  # type: ignore[attr-defined]
        assert b"hunter2" not in raw and b"pbkdf2-sha256" in raw
        assert book.users["bob"].matches("hunter2")
        listed = await s.ListUsers(admin_pb2.ListUsersRequest(), None)
        assert [(u.name, u.mechanism) for u in listed.users] == [("bob", "pbkdf2-sha256")]
        bad = await s.UpsertUser(admin_pb2.UpsertUserRequest(name="<default>", password="x"), None)
        assert bad.error_code == ErrorCode.INVALID_REQUEST
        empty = await s.UpsertUser(admin_pb2.UpsertUserRequest(name="carl", password=""), None)
        assert empty.error_code == ErrorCode.INVALID_REQUEST
        gone = await s.DeleteUser(admin_pb2.DeleteUserRequest(name="nobody"), None)
        assert gone.error_code == ErrorCode.INVALID_REQUEST
        assert (await s.DeleteUser(admin_pb2.DeleteUserRequest(name="bob"), None)).error_code == 0
        assert book.users == {}

    run(scenario())


def test_a_user_keeps_its_password_beside_tokens_and_deletes_them_together(servicer) -> None:
    async def scenario() -> None:
        s, book = await servicer()
        tokens = [new_token("svc"), new_token("svc")]
        slots = [token_slot(t) for t in tokens]
        requests = [("svc", "pw"), *zip(slots, tokens, strict=True)]
        for name, secret in requests:
            reply = await s.UpsertUser(
                admin_pb2.UpsertUserRequest(name=name, password=secret), None
            )
            assert reply.error_code == 0, reply.error_message
        assert set(book.users) == {"svc", *slots}
        assert book.users["svc"].matches("pw")  # a token did not replace the password
        assert all(book.users[n].matches(t) for n, t in zip(slots, tokens, strict=True))
        # A quota for a user that holds only tokens is accepted (the user is known).
        only = new_token("bot")
        await s.UpsertUser(admin_pb2.UpsertUserRequest(name=token_slot(only), password=only), None)
        quota = await s.AlterClientQuotas(
            alter((entity(user="bot"), {"producer_byte_rate": 1})), None
        )
        assert [r.error_code for r in quota.results] == [0]
        # A slot takes only its own token, and changes nothing otherwise.
        wrong = await s.UpsertUser(
            admin_pb2.UpsertUserRequest(name=slots[0], password=tokens[1]), None
        )
        assert wrong.error_code == ErrorCode.INVALID_REQUEST
        assert book.users[slots[0]].matches(tokens[0])
        # One token alone, then the user with its password and remaining token.
        await s.DeleteUser(admin_pb2.DeleteUserRequest(name=slots[0]), None)
        assert set(book.users) == {"svc", slots[1], token_slot(only)}
        assert (await s.DeleteUser(admin_pb2.DeleteUserRequest(name="svc"), None)).error_code == 0
        assert set(book.users) == {token_slot(only)}

    run(scenario())


def test_the_watch_stream_sends_the_state_then_every_change(servicer) -> None:
    async def scenario() -> None:
        s, _ = await servicer()
        stream = s.WatchClientQuotas(metadata_pb2.WatchClientQuotasRequest(node_id=7), None)
        first = await anext(stream)
        resolver, users = image_from_proto(first)
        assert len(resolver) == 0 and users == {}
        next_image = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        await s.AlterClientQuotas(alter((entity(client_id="app"), {"producer_byte_rate": 5})), None)
        second = await asyncio.wait_for(next_image, 1)
        assert second.version > first.version
        resolver, _ = image_from_proto(second)
        assert len(resolver) == 1
        await stream.aclose()

    run(scenario())
