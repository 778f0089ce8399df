"""`FrameReader`: exact reads into the caller's buffer, whatever way the bytes arrive (ahead
of the read, split, several frames in one write, more than the stash holds), and the end of
the connection reported to a read that waits."""

from __future__ import annotations

import asyncio
import os

import pytest

from riverlog.common.frame_reader import STASH_LIMIT, FrameReader


async def _read_all(chunks: list[bytes], sizes: list[int], close: bool = False) -> list[bytes]:
    """Serve `chunks` (then close when `close`, else wait for the client to go) and read
    `sizes` bytes after bytes with a FrameReader."""
    finished = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for chunk in chunks:
                writer.write(chunk)
                await writer.drain()
                await asyncio.sleep(0)
            if not close:
                await reader.read()  # until the client goes
            writer.close()
            await writer.wait_closed()
        finally:
            finished.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    transport, reader = await loop.create_connection(FrameReader, "127.0.0.1", port)
    try:
        return [bytes(await reader.read_exactly(size)) for size in sizes]
    finally:
        transport.close()
        async with asyncio.timeout(5):
            await finished.wait()
        server.close()
        await server.wait_closed()


@pytest.mark.timeout(10)
def test_reads_are_exact_however_the_bytes_arrive() -> None:
    big = os.urandom(3 * STASH_LIMIT + 5)  # more than the stash takes before pausing
    data = b"head" + big + b"tail"
    splits = [
        [data],
        [data[:1], data[1:7], data[7:100_000], data[100_000:]],
        [data[i : i + 4096] for i in range(0, len(data), 4096)],
    ]
    for chunks in splits:
        got = asyncio.run(_read_all(chunks, [4, len(big), 4]))
        assert got == [b"head", big, b"tail"]


@pytest.mark.timeout(10)
def test_a_closed_connection_fails_the_waiting_read() -> None:
    with pytest.raises(ConnectionResetError):
        asyncio.run(_read_all([b"abc"], [2, 5], close=True))
