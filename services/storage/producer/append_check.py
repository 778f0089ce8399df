"""The leader's check of a produce payload against the producers' state, before the append
(Kafka's ProducerAppendInfo with origin CLIENT, and UnifiedLog's duplicate detection).

For every batch that carries a producer id, in payload order:

- its epoch is older than the producer's known epoch: INVALID_PRODUCER_EPOCH (what Kafka 2.7+
  answers on produce; PRODUCER_FENCED is the transaction coordinator's answer);
- it repeats one of the producer's remembered batches (same epoch, same first and last
  sequence): a duplicate. It is not written again; the caller answers with the offsets it was
  first written at (Kafka's DUPLICATE_SEQUENCE handling since 1.0);
- a new epoch must start at sequence 0, unless the producer is unknown here;
- in the known epoch the first sequence must follow the last one (after the batches earlier in
  the same payload): else OUT_OF_ORDER_SEQUENCE_NUMBER;
- an unknown producer (never seen, or expired, or its batches removed by retention) may start at
  any sequence, as Kafka accepts since 2.5 (KIP-360) instead of UNKNOWN_PRODUCER_ID;
- a transaction marker (a control batch, which only the coordinator may write) must not be
  older than the producer's epoch and carries no sequence; written, its epoch is the
  producer's, so a late batch of the ended transaction (an older epoch) is refused (KIP-890);
  and it must not come from an older transaction coordinator than the producer's last marker
  (its coordinator epoch): else TRANSACTION_COORDINATOR_FENCED, so a deposed coordinator's
  late marker cannot end the next transaction (Kafka's ProducerAppendInfo.appendEndTxnMarker).

The check reads batch headers only. A payload whose headers cannot even be walked is left to
the log's validation, which refuses it as CORRUPT_MESSAGE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.control import EndTxnMarker, parse_end_txn_marker
from riverlog.common.records.header import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    BatchHeader,
    InvalidBatchError,
    parse_header,
    peek_size,
    validate_batch,
)

from .entry import BatchMetadata, ProducerStateEntry, in_sequence

Payload = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A payload whose every batch was already written: the offsets of the first write."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    batch_count: int


@dataclass(slots=True)
class LeaderCheck:
    """The outcome of `check_leader_append`: the headers of the payload (to update the state
    once the log has assigned offsets), or the duplicate to answer with."""

    headers: list[BatchHeader] = field(default_factory=list)
    duplicate: Duplicate | None = None
    # What each marker (control batch) of the payload says, by its index in `headers`.
    markers: dict[int, EndTxnMarker] = field(default_factory=dict)

    @property
    def has_producer_batches(self) -> bool:
        return any(h.producer_id >= 0 for h in self.headers)


def read_headers(payload: Payload) -> list[BatchHeader] | None:
    """The headers of a payload of whole batches, or None if it cannot be walked."""
    headers: list[BatchHeader] = []
    position, end = 0, len(payload)
    try:
        while position < end:
            size = peek_size(payload, position)
            if size < 0 or position + size > end:
                return None
            headers.append(parse_header(payload, position))
            position += size
    except InvalidBatchError:
        return None
    return headers


def check_leader_append(
    tp: object, payload: Payload, producers: Mapping[int, ProducerStateEntry]
) -> LeaderCheck:
    """Check `payload` against `producers` (not modified). Raises RiverlogError
    INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER or DUPLICATE_SEQUENCE_NUMBER (a
    payload mixing retried and new batches, which no producer of ours sends)."""
    headers = read_headers(payload)
    if headers is None:
        return LeaderCheck()
    check = LeaderCheck(headers)
    if not check.has_producer_batches:
        return check
    # (epoch, last sequence) of each producer after the batches earlier in this payload.
    pending: dict[int, tuple[int, int]] = {}
    duplicates: list[tuple[BatchHeader, BatchMetadata]] = []
    position = 0
    positions: list[int] = []
    for i, header in enumerate(headers):
        positions.append(position)
        position += header.size
        pid = header.producer_id
        if pid < 0:
            continue
        entry = producers.get(pid)
        if header.is_control:
            marker = read_marker(payload, positions[-1])
            if marker is None:
                continue  # not a well-formed marker: the log's validation refuses it
            check.markers[i] = marker
            _check_coordinator_epoch(tp, pid, marker, entry)
        if entry is not None and pid not in pending:
            dup = entry.find_duplicate(
                header.producer_epoch, header.base_sequence, header.last_sequence
            )
            if dup is not None:
                duplicates.append((header, dup))
                continue
        _check_batch(tp, header, entry, pending.get(pid))
        pending[pid] = (header.producer_epoch, header.last_sequence)
    if duplicates:
        if len(duplicates) != len(headers):
            raise RiverlogError(
                f"{tp}: the payload repeats {len(duplicates)} already written batch(es) next to "
                "new ones; send retried batches on their own",
                ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
            )
        for pos in positions:  # answer only for bytes that are whole and intact
            try:
                validate_batch(payload, pos)
            except InvalidBatchError:
                return LeaderCheck(headers)  # the log refuses it as CORRUPT_MESSAGE
        metas = [meta for _, meta in duplicates]
        check.duplicate = Duplicate(
            first_offset=metas[0].first_offset,
            last_offset=metas[-1].last_offset,
            max_timestamp=max(meta.timestamp for meta in metas),
            record_count=sum(h.records_count for h, _ in duplicates),
            batch_count=len(metas),
        )
    return check


def read_marker(payload: Payload, position: int) -> EndTxnMarker | None:
    """The marker in the control batch at `position`, or None when it is not one."""
    try:
        return parse_end_txn_marker(payload, position)
    except InvalidBatchError:
        return None


def _check_coordinator_epoch(
    tp: object, pid: int, marker: EndTxnMarker, entry: ProducerStateEntry | None
) -> None:
    if entry is not None and marker.coordinator_epoch < entry.coordinator_epoch:
        raise RiverlogError(
            f"{tp}: marker of producer {pid} from coordinator epoch {marker.coordinator_epoch}, "
            f"older than the epoch {entry.coordinator_epoch} of its last marker",
            ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        )


def _check_batch(
    tp: object,
    header: BatchHeader,
    entry: ProducerStateEntry | None,
    pending: tuple[int, int] | None,
) -> None:
    pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
    if pending is not None:
        current_epoch, current_last = pending
    elif entry is not None:
        current_epoch, current_last = entry.producer_epoch, entry.last_seq
    else:
        return  # an unknown producer starts anywhere (KIP-360)
    if header.is_control:
        # A transaction's marker (the coordinator's append): its epoch is the one the
        # transaction ended with, bumped (KIP-890), so it must not be older than the last;
        # it carries no sequence, and the producer's next epoch starts at 0.
        if epoch < current_epoch:
            raise RiverlogError(
                f"{tp}: marker epoch {epoch} of producer {pid} is older than its last seen "
                f"epoch {current_epoch}",
                ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        return
    if epoch < current_epoch:
        raise RiverlogError(
            f"{tp}: epoch {epoch} of producer {pid} is older than its last seen epoch "
            f"{current_epoch}",
            ErrorCode.INVALID_PRODUCER_EPOCH,
        )
    if epoch != current_epoch:
        if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
            raise RiverlogError(
                f"{tp}: producer {pid} starts its new epoch {epoch} at sequence {first_seq} "
                f"instead of 0 (current epoch {current_epoch})",
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            )
        return
    if current_last == NO_SEQUENCE and first_seq == 0:
        return
    if not in_sequence(current_last, first_seq):
        raise RiverlogError(
            f"{tp}: out of order sequence for producer {pid} epoch {epoch}: {first_seq} "
            f"(incoming), {current_last} (last written)",
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        )
