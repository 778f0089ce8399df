"""Client quota and user administration for `AdminClient` (Kafka's Admin alterClientQuotas,
describeClientQuotas, and SCRAM user upserts/deletions), over the gateway's passthrough RPCs.

Entities are `riverlog.common.quota.QuotaEntity`: a user, a client-id or both, where the name
`DEFAULT` ("<default>") is Kafka's default entity. A value of None in an alteration removes the
key. Per-entity refusals (a negative value, an unknown key, a quota for an unknown user) come
back as RiverlogError, raised for the first by default or returned per entity. Passwords are
sent to the metadata service over the client's channel and stored there only as salted hashes.
`QuotaAdminMixin` needs only the admin client's `_call`. Thread-safe, as the admin client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from riverlog.common.errors import RiverlogError, error_for
from riverlog.common.quota.convert import (
    CLIENT_ID,
    USER,
    entity_from_proto,
    entity_to_proto,
)
from riverlog.common.quota.entity import DEFAULT, QuotaEntity
from riverlog.v1 import admin_pb2

_Match = admin_pb2.DescribeClientQuotasRequest

QuotaAlteration = tuple[QuotaEntity, Mapping[str, float | None]]


def _component(entity_type: str, name: str | None) -> _Match.Component:
    if name is None:
        return _Match.Component(entity_type=entity_type, match_type=_Match.MATCH_SPECIFIED)
    if name == DEFAULT:
        return _Match.Component(entity_type=entity_type, match_type=_Match.MATCH_DEFAULT)
    return _Match.Component(entity_type=entity_type, match_type=_Match.MATCH_EXACT, match=name)


class QuotaAdminMixin:
    """Mixed into AdminClient, which provides `_call`."""

    _call: Callable[[Callable[[Any], Any], Any], Any]

    def alter_client_quotas(
        self,
        alterations: Iterable[QuotaAlteration],
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> dict[QuotaEntity, RiverlogError | None]:
        """Set (a number) or remove (None) quota keys per entity; one outcome per entity."""
        request = admin_pb2.AlterClientQuotasRequest(validate_only=validate_only)
        entities = []
        for entity, values in alterations:
            entry = request.entries.add()
            entry.entity.CopyFrom(entity_to_proto(entity))
            for key, value in values.items():
                entry.ops.add(key=key, value=value or 0.0, remove=value is None)
            entities.append(entity)
        response = self._call(lambda stub: stub.AlterClientQuotas, request)
        outcomes: dict[QuotaEntity, RiverlogError | None] = {}
        for entity, result in zip(entities, response.results, strict=False):
            error = (
                error_for(result.error_code, result.error_message) if result.error_code else None
            )
            if error is not None and raise_on_error:
                raise error
            outcomes[entity] = error
        return outcomes

    def describe_client_quotas(
        self, user: str | None = None, client_id: str | None = None, strict: bool = False
    ) -> dict[QuotaEntity, dict[str, float]]:
        """The configured quotas matching the filter: a name matches exactly, `DEFAULT` the
        default entity; a part left None is not filtered. `strict`: only entities with no
        other parts."""
        request = admin_pb2.DescribeClientQuotasRequest(strict=strict)
        if user is not None:
            request.components.append(_component(USER, user))
        if client_id is not None:
            request.components.append(_component(CLIENT_ID, client_id))
        response = self._call(lambda stub: stub.DescribeClientQuotas, request)
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        return {entity_from_proto(e.entity): dict(e.values) for e in response.entries}

    def upsert_user(self, name: str, password: str) -> None:
        """Store (or replace) a user's credential."""
        request = admin_pb2.UpsertUserRequest(name=name, password=password)
        response = self._call(lambda stub: stub.UpsertUser, request)
        if response.error_code:
            raise error_for(response.error_code, response.error_message)

    def delete_user(self, name: str) -> None:
        response = self._call(lambda stub: stub.DeleteUser, admin_pb2.DeleteUserRequest(name=name))
        if response.error_code:
            raise error_for(response.error_code, response.error_message)

    def list_users(self) -> list[str]:
        response = self._call(lambda stub: stub.ListUsers, admin_pb2.ListUsersRequest())
        return [u.name for u in response.users]
