"""The asyncio SDK: `AIOProducer`, `AIOConsumer` and `AIOAdminClient`, the sync clients'
counterparts for asyncio applications, with the same configuration keys, errors and semantics
(each wraps its sync client; decision 0037).

    from riverlog.client.aio import AIOAdminClient, AIOConsumer, AIOProducer
"""

from .admin import AIOAdminClient
from .consumer import AIOConsumer
from .producer import AIOProducer

__all__ = ["AIOAdminClient", "AIOConsumer", "AIOProducer"]
