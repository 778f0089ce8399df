"""`AIOAdminClient`: every `AdminClient` method as an awaitable, generated from the sync
method (`awaitable`), run on a small thread pool of its own (the sync client is thread-safe, so
independent admin calls overlap, as they would from threads)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from typing import TypeVar

from .._closing import AsyncClosing
from ..admin import AdminClient
from ._wrap import awaitable

T = TypeVar("T")
_WORKERS = 4


class AIOAdminClient(AsyncClosing):
    """Administers the cluster from coroutines: the same methods, arguments, results and
    errors as `AdminClient`, each awaited.

        async with AIOAdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            await admin.create_topics([NewTopic("events", num_partitions=6)])

    Lifecycle: created → calls... → `await close()` (also on leaving `async with`)."""

    def __init__(self, conf: Mapping[str, object] | None = None, **kwargs: object) -> None:
        self._admin = AdminClient(conf, **kwargs)
        self.config = self._admin.config
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=_WORKERS, thread_name_prefix="riverlog-aio-admin"
        )
        self._closed = False

    @property
    def _sync(self) -> AdminClient:
        return self._admin

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            return fn()  # the sync client raises ClientClosedError without blocking
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    # topics (admin.py)
    create_topics = awaitable(AdminClient.create_topics)
    delete_topics = awaitable(AdminClient.delete_topics)
    list_topics = awaitable(AdminClient.list_topics)
    describe_topics = awaitable(AdminClient.describe_topics)
    describe_configs = awaitable(AdminClient.describe_configs)
    alter_configs = awaitable(AdminClient.alter_configs)
    create_partitions = awaitable(AdminClient.create_partitions)
    delete_records = awaitable(AdminClient.delete_records)
    list_offsets = awaitable(AdminClient.list_offsets)
    describe_cluster = awaitable(AdminClient.describe_cluster)
    elect_leaders = awaitable(AdminClient.elect_leaders)
    # consumer groups (group_admin.py)
    list_groups = awaitable(AdminClient.list_groups)
    describe_groups = awaitable(AdminClient.describe_groups)
    delete_groups = awaitable(AdminClient.delete_groups)
    list_group_offsets = awaitable(AdminClient.list_group_offsets)
    alter_group_offsets = awaitable(AdminClient.alter_group_offsets)
    # quotas and users (quota_admin.py)
    alter_client_quotas = awaitable(AdminClient.alter_client_quotas)
    describe_client_quotas = awaitable(AdminClient.describe_client_quotas)
    upsert_user = awaitable(AdminClient.upsert_user)
    delete_user = awaitable(AdminClient.delete_user)
    list_users = awaitable(AdminClient.list_users)
    # reassignments and balance (reassignment_admin.py, balance_admin.py)
    alter_partition_reassignments = awaitable(AdminClient.alter_partition_reassignments)
    list_partition_reassignments = awaitable(AdminClient.list_partition_reassignments)
    balance_replicas = awaitable(AdminClient.balance_replicas)
    alter_node_draining = awaitable(AdminClient.alter_node_draining)
    # log dirs and replica sizes (log_dirs_admin.py)
    describe_log_dirs = awaitable(AdminClient.describe_log_dirs)
    # transactions (transaction_admin.py)
    abort_transaction = awaitable(AdminClient.abort_transaction)
    complete_transaction = awaitable(AdminClient.complete_transaction)
    fence_producers = awaitable(AdminClient.fence_producers)
    list_transactions = awaitable(AdminClient.list_transactions)
    describe_transactions = awaitable(AdminClient.describe_transactions)
    # dynamic node configs (node_config_admin.py)
    describe_node_configs = awaitable(AdminClient.describe_node_configs)
    alter_node_configs = awaitable(AdminClient.alter_node_configs)
    # ACLs (acl_admin.py)
    create_acls = awaitable(AdminClient.create_acls)
    describe_acls = awaitable(AdminClient.describe_acls)
    delete_acls = awaitable(AdminClient.delete_acls)

    async def close(self) -> None:
        """Close the channels once the calls under way end. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._call(self._admin.close)
        finally:
            self._executor.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<AIOAdminClient over {self._admin!r}>"
