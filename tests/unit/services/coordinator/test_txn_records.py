"""`__transaction_state` records: every metadata value survives encode → decode, the key is one
encoding per id (compaction keeps the latest by bytes), and Dead is a tombstone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.records import owner_marker
from riverlog.services.coordinator.txn.metadata import TransactionMetadata
from riverlog.services.coordinator.txn.records import (
    decode_transaction,
    decode_transaction_key,
    transaction_key,
    transaction_record,
)
from riverlog.services.coordinator.txn.state import TransactionState

pytestmark = pytest.mark.timeout(60)

partitions = st.frozensets(
    st.builds(TopicPartition, st.text(min_size=1, max_size=8), st.integers(0, 1000)), max_size=6
)
metadata = st.builds(
    TransactionMetadata,
    st.text(max_size=20),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 32_767),
    st.integers(1, 2**31 - 1),
    st.sampled_from([s for s in TransactionState if s is not TransactionState.DEAD]),
    partitions,
    st.integers(-1, 32_767),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**62),
    st.integers(0, 2**62),
)


@given(metadata)
def test_every_metadata_survives_a_round_trip(meta: TransactionMetadata) -> None:
    record = transaction_record(meta)
    assert record.key == transaction_key(meta.transactional_id)
    assert decode_transaction_key(record.key) == meta.transactional_id
    assert record.value is not None
    assert decode_transaction(meta.transactional_id, record.value) == meta


def test_dead_is_a_tombstone_and_owner_markers_are_not_transactions() -> None:
    dead = TransactionMetadata("t", 1, 0, 1000, TransactionState.DEAD)
    assert transaction_record(dead).value is None
    assert decode_transaction_key(owner_marker(3, 7).key) is None


def test_the_same_metadata_always_encodes_to_the_same_bytes() -> None:
    parts = [TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)]
    one = TransactionMetadata("t", 5, 1, 1000, TransactionState.ONGOING, frozenset(parts))
    two = TransactionMetadata("t", 5, 1, 1000, TransactionState.ONGOING, frozenset(parts[::-1]))
    assert transaction_record(one) == transaction_record(two)
    assert b'"parts":{"a":[0,2],"b":[1]}' in (transaction_record(one).value or b"")
