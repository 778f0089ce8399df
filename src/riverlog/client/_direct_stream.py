"""A bidirectional stream driven on grpcio's channel thread, without its helper threads
(issue 10, decision 0019).

grpcio's sync client runs a stream-stream call with two threads of its own on top of the
channel's: one pulls the request iterator (the caller hands it each request through a queue,
and it waits for each send to complete before taking the next), and the caller needs another to
block in `next(call)` for the answers, woken by the channel thread. At 1,000 records/s every
produce answer and every next request crossed those two wake-ups (0.1-0.4 ms each on this VM),
on top of the ones no client can avoid.

`DirectStream` issues the same core operations itself: `write` starts the send on the caller's
thread when no send is in progress, else queues the bytes and the channel thread starts the next
send when the previous one completes (a call takes one send at a time); every answer goes to
`on_message` on the channel thread, which starts the next receive first. The stream's end (its
status) goes to `on_end` once. So an answer reaches the producer's sender thread or the
consumer's polling thread with one wake-up, and the sender's request goes on the wire from its
own thread.

This uses grpcio internals (`grpc._channel`'s call state and managed-call factory), as the
public sync API has no way to write to a stream or read from it without those threads.
`open_direct` returns None where they are not as expected (a grpcio release outside
TESTED_GRPCIO, an intercepted channel), and the caller keeps the iterator path.
"""

from __future__ import annotations

import collections
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import grpc

log = logging.getLogger(__name__)

TESTED_GRPCIO: tuple[str, ...] = ("1.85.",)
"""grpcio releases whose internals this module was tested against (the test suite runs both
paths on them). Another release takes the public path: internals with the same names could
still behave differently, and a stream that hangs is worse than one wake-up more."""

try:  # internals: checked once, and any mismatch falls back to grpcio's public path
    from grpc import _channel as _gc
    from grpc import _common as _gcommon
    from grpc._cython import cygrpc as _cygrpc

    _OPS = _cygrpc.OperationType
    _AVAILABLE = grpc.__version__.startswith(TESTED_GRPCIO) and all(
        hasattr(x, name)
        for x, name in (
            (_gc, "_StreamStreamMultiCallable"),
            (_gc, "_RPCState"),
            (_gc, "_MultiThreadedRendezvous"),
            (_gc, "_InitialMetadataFlags"),
            (_gc, "_STREAM_STREAM_INITIAL_DUE"),
            (_gcommon, "CYGRPC_STATUS_CODE_TO_STATUS_CODE"),
            (_gcommon, "STATUS_CODE_TO_CYGRPC_STATUS_CODE"),
            (_cygrpc, "SendMessageOperation"),
            (_cygrpc, "ReceiveMessageOperation"),
            (_cygrpc, "get_fork_epoch"),
        )
    )
except ImportError:  # pragma: no cover - another grpcio
    _AVAILABLE = False

_NO_FLAGS = 0
DISABLE_ENV = "RIVERLOG_SDK_DIRECT_STREAMS"
"""Set to 0 to run the SDK's streams on grpcio's public iterator path (tests cover both; benches
compare them)."""


class DirectStream:
    """One open stream. `write` from any thread (in order of the calls); `cancel` from any
    thread. `on_message(response)` and then `on_end(error)` (a grpc.RpcError, also for a
    clean end) run on grpcio's channel thread: they must not block on this stream's answers."""

    def __init__(
        self,
        multicallable: Any,
        metadata: tuple[tuple[str, str], ...],
        serializer: Callable[[Any], bytes],
        deserializer: Callable[[bytes], Any],
        on_message: Callable[[Any], None],
        on_end: Callable[[grpc.RpcError], None],
    ) -> None:
        self._serialize = serializer
        self._deserialize = deserializer
        self._on_message = on_message
        self._on_end = on_end
        self._queued: collections.deque[bytes] = collections.deque()
        self._sending = False
        state = _gc._RPCState(_gc._STREAM_STREAM_INITIAL_DUE, None, None, None, None)
        state.rpc_start_time = time.perf_counter()
        state.method = _gcommon.decode(multicallable._method)
        state.target = _gcommon.decode(multicallable._target)
        self._state = state
        operations = (
            (
                _cygrpc.SendInitialMetadataOperation(metadata, _gc._InitialMetadataFlags()),
                _cygrpc.ReceiveStatusOnClientOperation(_NO_FLAGS),
            ),
            (_cygrpc.ReceiveInitialMetadataOperation(_NO_FLAGS),),
        )
        with state.condition:  # the first events must find `_call` set
            self._call = multicallable._managed_call(
                _cygrpc.PropagationConstants.GRPC_PROPAGATE_DEFAULTS,
                multicallable._method,
                None,
                None,
                metadata,
                None,
                operations,
                self._handle,
                multicallable._context,
                getattr(multicallable, "_registered_call_handle", None),
            )
            self._receive()

    def write(self, request: Any) -> None:
        """Send `request` (serialized here, on the caller's thread). A write after the end is
        dropped: the stream's end fails whatever waits for an answer."""
        data = self._serialize(request)
        state = self._state
        with state.condition:
            if state.code is not None:
                return
            if self._sending:
                self._queued.append(data)
            else:
                self._send(data)

    def cancel(self) -> None:
        state = self._state
        with state.condition:
            if state.code is None:
                state.code = grpc.StatusCode.CANCELLED
                state.details = "Locally cancelled by application!"
                state.cancelled = True
                self._call.cancel(
                    _gcommon.STATUS_CODE_TO_CYGRPC_STATUS_CODE[state.code], state.details
                )
                self._queued.clear()
                state.condition.notify_all()

    # ---- under state.condition ----------------------------------------------------------

    def _send(self, data: bytes) -> None:
        self._state.due.add(_OPS.send_message)
        if self._call.operate((_cygrpc.SendMessageOperation(data, _NO_FLAGS),), self._handle):
            self._sending = True
        else:  # the call is over; its status event ends the stream
            self._state.due.discard(_OPS.send_message)
            self._sending = False

    def _receive(self) -> None:
        self._state.due.add(_OPS.receive_message)
        if not self._call.operate((_cygrpc.ReceiveMessageOperation(_NO_FLAGS),), self._handle):
            self._state.due.discard(_OPS.receive_message)

    # ---- on the channel thread -----------------------------------------------------------

    def _handle(self, event: Any) -> bool:
        """grpcio's event handler: an exception escaping it would end the channel thread and
        every call on the channel with it, so one is logged and the stream cancelled."""
        try:
            return self._handle_event(event)
        except Exception:
            log.exception("a stream event on %s failed", self._state.method)
            self.cancel()
            with self._state.condition:
                done = not self._state.due
            return bool(done and self._state.fork_epoch >= _cygrpc.get_fork_epoch())

    def _handle_event(self, event: Any) -> bool:
        state = self._state
        received: list[bytes] = []
        ended = False
        with state.condition:
            for operation in event.batch_operations:
                kind = operation.type()
                state.due.discard(kind)
                if kind == _OPS.receive_message:
                    data = operation.message()
                    if data is not None:
                        received.append(data)
                        if state.code is None:
                            self._receive()
                elif kind == _OPS.send_message:
                    self._sending = False
                    if self._queued and state.code is None:
                        self._send(self._queued.popleft())
                elif kind == _OPS.receive_initial_metadata:
                    state.initial_metadata = operation.initial_metadata()
                elif kind == _OPS.receive_status_on_client:
                    state.trailing_metadata = operation.trailing_metadata()
                    if state.code is None:
                        code = _gcommon.CYGRPC_STATUS_CODE_TO_STATUS_CODE.get(operation.code())
                        state.code = code or grpc.StatusCode.UNKNOWN
                        state.details = operation.details()
                        state.debug_error_string = operation.error_string()
                    if state.initial_metadata is None:
                        state.initial_metadata = ()
                    state.rpc_end_time = time.perf_counter()
                    self._queued.clear()
                    ended = True
            state.condition.notify_all()
            done = not state.due
        for data in received:
            try:
                response = self._deserialize(data)
            except Exception:
                log.exception("cannot parse an answer on %s", state.method)
                self.cancel()  # the end tells every request waiting on it
                continue
            try:
                self._on_message(response)
            except Exception:  # never kill grpcio's channel thread
                log.exception("handling an answer on %s failed", state.method)
        if ended:
            try:
                self._on_end(_gc._MultiThreadedRendezvous(state, self._call, None, None))
            except Exception:
                log.exception("ending %s failed", state.method)
        return bool(done and state.fork_epoch >= _cygrpc.get_fork_epoch())


def open_direct(
    channel: grpc.Channel,
    method: str,
    metadata: tuple[tuple[str, str], ...],
    serializer: Callable[[Any], bytes],
    deserializer: Callable[[bytes], Any],
    on_message: Callable[[Any], None],
    on_end: Callable[[grpc.RpcError], None],
) -> DirectStream | None:
    """A `DirectStream` for `method` on `channel`, or None where grpcio's internals are not
    the ones this module drives or `RIVERLOG_SDK_DIRECT_STREAMS=0` (the caller then uses the
    public iterator path)."""
    global _AVAILABLE
    if not _AVAILABLE or os.environ.get(DISABLE_ENV) == "0":
        return None
    multicallable = channel.stream_stream(method)
    if type(multicallable) is not _gc._StreamStreamMultiCallable:  # intercepted (tracing)
        return None
    try:
        return DirectStream(multicallable, metadata, serializer, deserializer, on_message, on_end)
    except (TypeError, AttributeError):  # internals with the names checked but other shapes
        log.warning(
            "grpcio's internals differ: the SDK's streams take the public path", exc_info=True
        )
        _AVAILABLE = False
        return None
