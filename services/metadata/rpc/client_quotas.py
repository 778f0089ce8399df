"""The client quota and user RPCs of the MetadataService, as a mixin of its servicer.

Thin handlers over `ClientQuotaBook`: convert, call, convert back. Per-entity problems (bad
values, unknown keys, unknown users) come back in each entry's result; a bad user name or
password, or an unknown user to delete, is a per-call error code. WatchClientQuotas sends the
complete image at once and after every change (see `riverlog.common.cluster.quota_watcher`).
DescribeClientQuotas filters as Kafka's: each component filter matches an exact name, the
`<default>` name, or any name; `strict` leaves out entities with other components.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc

from riverlog.common.acl.convert import bindings_to_proto
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.convert import (
    CLIENT_ID,
    ENTITY_TYPES,
    USER,
    entity_from_proto,
    entity_to_proto,
    image_to_proto,
)
from riverlog.common.quota.entity import DEFAULT, QuotaEntity
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.v1 import admin_pb2, metadata_pb2

from ..client_quotas import ClientQuotaBook, QuotaOp
from .convert import UNREACHED, answer_or_error

log = logging.getLogger(__name__)

_Match = admin_pb2.DescribeClientQuotasRequest


def _matches(entity: QuotaEntity, request: admin_pb2.DescribeClientQuotasRequest) -> bool:
    parts = {USER: entity.user, CLIENT_ID: entity.client_id}
    filtered = set()
    for component in request.components:
        if component.entity_type not in ENTITY_TYPES:
            raise RiverlogError(
                f"unknown quota entity type {component.entity_type!r}", ErrorCode.INVALID_REQUEST
            )
        filtered.add(component.entity_type)
        name = parts[component.entity_type]
        if name is None:
            return False
        if component.match_type == _Match.MATCH_EXACT and name != component.match:
            return False
        if component.match_type == _Match.MATCH_DEFAULT and name != DEFAULT:
            return False
    if request.strict:
        present = {t for t, n in parts.items() if n is not None}
        return present <= filtered
    return True


class ClientQuotasRpc:
    """Mixed into MetadataServicer, which sets `client_quotas`."""

    client_quotas: ClientQuotaBook

    async def AlterClientQuotas(
        self, request: admin_pb2.AlterClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterClientQuotasResponse:
        out = admin_pb2.AlterClientQuotasResponse()
        parsed: list[tuple[int, QuotaEntity, list[QuotaOp]]] = []
        for i, entry in enumerate(request.entries):
            result = out.results.add()
            result.entity.CopyFrom(entry.entity)
            try:
                entity = entity_from_proto(entry.entity)
            except RiverlogError as exc:
                result.error_code = error_code_to_proto(exc.code)
                result.error_message = exc.message
                continue
            ops = [QuotaOp(op.key, op.value, op.remove) for op in entry.ops]
            parsed.append((i, entity, ops))
        results = await self.client_quotas.alter(
            [(entity, ops) for _, entity, ops in parsed], request.validate_only
        )
        for (i, _, _), outcome in zip(parsed, results, strict=True):
            if outcome.error is not None:
                out.results[i].error_code = error_code_to_proto(outcome.error.code)
                out.results[i].error_message = outcome.error.message
        return out

    async def DescribeClientQuotas(
        self, request: admin_pb2.DescribeClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeClientQuotasResponse:
        out = admin_pb2.DescribeClientQuotasResponse()
        try:
            chosen = [
                (entity, values)
                for entity, values in self.client_quotas.configs.items()
                if _matches(entity, request)
            ]
        except RiverlogError as exc:
            out.error_code = int(exc.code)  # type: ignore[assignment]
            out.error_message = exc.message
            return out
        for entity, values in sorted(chosen, key=lambda kv: kv[0].path):
            entry = out.entries.add(values={t.key: v for t, v in values.items()})
            entry.entity.CopyFrom(entity_to_proto(entity))
        return out

    async def UpsertUser(
        self, request: admin_pb2.UpsertUserRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.UpsertUserResponse:
        async def upsert() -> admin_pb2.UpsertUserResponse:
            await self.client_quotas.upsert_user(request.name, request.password)
            log.info("stored credential of user %r", request.name)
            return admin_pb2.UpsertUserResponse()

        return await answer_or_error(admin_pb2.UpsertUserResponse, upsert(), raised=UNREACHED)

    async def DeleteUser(
        self, request: admin_pb2.DeleteUserRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteUserResponse:
        async def delete() -> admin_pb2.DeleteUserResponse:
            await self.client_quotas.delete_user(request.name)
            log.info("deleted user %r", request.name)
            return admin_pb2.DeleteUserResponse()

        return await answer_or_error(admin_pb2.DeleteUserResponse, delete(), raised=UNREACHED)

    async def ListUsers(
        self, request: admin_pb2.ListUsersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListUsersResponse:
        users = sorted(self.client_quotas.users.values(), key=lambda u: u.name)
        return admin_pb2.ListUsersResponse(
            users=[
                admin_pb2.UserDescription(
                    name=u.name, mechanism=u.mechanism, iterations=u.iterations
                )
                for u in users
            ]
        )

    async def WatchClientQuotas(
        self, request: metadata_pb2.WatchClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[metadata_pb2.ClientQuotaImage]:
        book = self.client_quotas
        log.debug("quota watch opened by %d at version %d", request.node_id, book.version)
        while True:
            version = book.version
            image = image_to_proto(version, book.configs, book.users.values())
            image.acls.extend(bindings_to_proto(book.acls.bindings()))
            yield image
            await book.changed(version)
