"""A userspace stand-in for `tc netem delay`, for kernels built without sch_netem (this
machine's is): run inside a node's network namespace, it takes the packets an iptables
`NFQUEUE` rule queues (the node's outgoing packets) and lets each one go `delay` ± `jitter` ms
later (normal distribution, as netem's default), so packets overtake each other as under netem
with jitter; `--reorder PCT` lets that share of packets go at once, ahead of the delayed ones
(netem's `reorder`). Loss and duplication need no helper: iptables' `statistic` match with
DROP and TEE does them in the kernel (see `net.py`).

Speaks the nfnetlink_queue protocol over a raw netlink socket (no C library): bind the queue,
copy only packet metadata (ids), and send one verdict per packet, in release order. Runs until
SIGTERM/SIGINT or `--max-seconds` (it always stops by itself); the queue rule uses
`--queue-bypass`, so packets flow undelayed whenever no helper listens.

    ip netns exec NS python netem_queue.py --queue 7 --delay-ms 100 --jitter-ms 20
"""

from __future__ import annotations

import argparse
import heapq
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NFQA_CFG_F_GSO = 4
NF_ACCEPT = 1
QUEUE_MAXLEN = 20000


def message(kind: int, flags: int, seq: int, queue: int, attrs: list[tuple[int, bytes]]) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue))
    for attr_type, data in attrs:
        length = 4 + len(data)
        body += struct.pack("=HH", length, attr_type) + data + b"\0" * (-length % 4)
    header = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, seq, 0)
    return header + body


def packet_ids(data: bytes) -> tuple[list[int], list[int]]:
    """(packet ids, netlink error codes) in a datagram from the kernel."""
    ids: list[int] = []
    errors: list[int] = []
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _, _, _ = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            attr = offset + 20  # netlink header + nfgenmsg
            while attr + 4 <= offset + length:
                attr_len, attr_type = struct.unpack_from("=HH", data, attr)
                if attr_len < 4:
                    break
                if attr_type & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from(">I", data, attr + 4)[0])
                attr += (attr_len + 3) & ~3
        elif kind == NLMSG_ERROR:
            code = struct.unpack_from("=i", data, offset + 16)[0]
            if code:
                errors.append(code)
        offset += (length + 3) & ~3
    return ids, errors


class Queue:
    def __init__(self, number: int) -> None:
        self.number = number
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        self.sock.bind((0, 0))
        self._config(1, [(NFQA_CFG_CMD, struct.pack("=BBH", NFQNL_CFG_CMD_BIND, 0, 0))])
        flags = NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO
        self._config(
            2,
            [
                (NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META)),
                (NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", QUEUE_MAXLEN)),
                (NFQA_CFG_MASK, struct.pack(">I", flags)),
                (NFQA_CFG_FLAGS, struct.pack(">I", flags)),
            ],
        )

    def _config(self, seq: int, attrs: list[tuple[int, bytes]]) -> None:
        flags = NLM_F_REQUEST | NLM_F_ACK
        self.sock.send(message(NFQNL_MSG_CONFIG, flags, seq, self.number, attrs))
        _, errors = packet_ids(self.sock.recv(65536))
        if errors:
            raise OSError(-errors[0], f"nfqueue {self.number}: configuration refused")

    def verdict(self, packet_id: int) -> None:
        attrs = [(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))]
        self.sock.send(message(NFQNL_MSG_VERDICT, NLM_F_REQUEST, 0, self.number, attrs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--jitter-ms", type=float, default=20.0)
    parser.add_argument("--reorder", type=float, default=0.0, help="percent sent at once")
    parser.add_argument("--max-seconds", type=float, default=900.0)
    parser.add_argument("--ready-file", help="written once the queue is bound")
    args = parser.parse_args()
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    queue = Queue(args.queue)
    if args.ready_file:
        with open(args.ready_file, "w") as f:
            f.write("bound\n")
    rng = random.Random()
    held: list[tuple[float, int, int]] = []  # (release at, arrival order, packet id)
    arrivals = 0
    end = time.monotonic() + args.max_seconds
    delay, jitter = args.delay_ms / 1000.0, args.jitter_ms / 1000.0
    while not stop and time.monotonic() < end:
        now = time.monotonic()
        timeout = min(0.5, max(0.0, held[0][0] - now)) if held else 0.5
        try:
            readable, _, _ = select.select([queue.sock], [], [], timeout)
        except InterruptedError:
            continue
        if readable:
            try:
                data = queue.sock.recv(1 << 20)
            except OSError as e:  # ENOBUFS: the kernel dropped messages (fail-open)
                print(f"netem_queue: recv: {e}", file=sys.stderr, flush=True)
                continue
            ids, _ = packet_ids(data)
            now = time.monotonic()
            for packet_id in ids:
                arrivals += 1
                if rng.uniform(0, 100) < args.reorder:
                    queue.verdict(packet_id)
                    continue
                wait = max(0.0, rng.gauss(delay, jitter))
                heapq.heappush(held, (now + wait, arrivals, packet_id))
        now = time.monotonic()
        while held and held[0][0] <= now:
            queue.verdict(heapq.heappop(held)[2])
    for _, _, packet_id in held:  # let whatever is still held go
        queue.verdict(packet_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
