"""io.frame_reader.FrameReader driven as the selector loop drives a BufferedProtocol (``recv_into`` the
buffer ``get_buffer`` hands out, then ``buffer_updated``): frames come out whole and in order whatever
the read boundaries, and a frame larger than the scratch buffer is read in place -- the buffer the
"socket" writes into is the frame delivered, never copied (issue 29 item 4)."""

from __future__ import annotations

import asyncio
import struct

import pytest

from pykraft.io.frame_reader import LARGE_FRAME_FIRST_BYTES, SCRATCH_BYTES, Frame, FrameReader


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _feed(reader: FrameReader, stream: bytes, read_bytes: int) -> None:
    """What the loop does on each readable event: recv_into(get_buffer()) of at most ``read_bytes``."""
    position = 0
    while position < len(stream):
        buffer = reader.get_buffer(-1)
        assert len(buffer) > 0
        n = min(len(buffer), read_bytes, len(stream) - position)
        buffer[:n] = stream[position : position + n]
        position += n
        reader.buffer_updated(n)


BODIES = [
    b"\x00\x00\x00\x07small",
    bytes(range(256)) * 1000,  # 256,000 bytes: larger than the scratch
    b"\x00\x00\x00\x08",  # the smallest frame: a correlation id
    b"y" * (SCRATCH_BYTES - 4),  # exactly fills the scratch with its size
    b"z" * (SCRATCH_BYTES - 3),  # one byte too many for it
    b"\x00\x00\x00\x09" + b"tail" * 10,
]


@pytest.mark.parametrize("read_bytes", [1, 3, 4, 5, 4096, SCRATCH_BYTES + 3, 1 << 30])
def test_frames_come_out_whole_and_in_order_whatever_the_read_sizes(read_bytes: int) -> None:
    async def main() -> list[Frame]:
        reader = FrameReader(1 << 20)
        got: list[Frame] = []
        reader.deliver_to(got.append)
        _feed(reader, b"".join(_framed(b) for b in BODIES), read_bytes)
        return got

    assert [bytes(f) for f in asyncio.run(main())] == BODIES


def test_a_large_frame_is_read_into_its_own_buffer_without_a_copy() -> None:
    async def main() -> None:
        reader = FrameReader(1 << 20)
        got: list[Frame] = []
        reader.deliver_to(got.append)
        body = bytes(range(256)) * 4096  # 1 MiB
        stream = _framed(body)
        first = 1000  # the size and the start of the body arrive in the scratch
        reader.get_buffer(-1)[:first] = stream[:first]
        reader.buffer_updated(first)
        # The rest is asked for exactly, in the frame's own buffer: the kernel writes it there.
        rest = reader.get_buffer(-1)
        assert len(rest) == len(stream) - first
        frame_buffer = rest.obj
        rest[:] = stream[first:]
        del rest
        reader.buffer_updated(len(stream) - first)
        assert len(got) == 1 and got[0] is frame_buffer and got[0] == body
        # The next frame starts in the scratch again.
        _feed(reader, _framed(b"\x00\x00\x00\x01next"), 1 << 20)
        assert got[1] == b"\x00\x00\x00\x01next"

    asyncio.run(main())


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


@pytest.mark.parametrize("size", [3, -1, (1 << 20) + 1])
def test_a_frame_size_out_of_bounds_stops_reading_and_drops_the_connection(size: int) -> None:
    async def main() -> tuple[str, bool]:
        reader = FrameReader(1 << 20)
        transport = _Transport()
        reader.connection_made(transport)
        reader.deliver_to(lambda frame: None)
        _feed(reader, struct.pack(">i", size) + b"\x00" * 8, 1 << 20)
        return await reader.closed, transport.aborted

    reason, aborted = asyncio.run(main())
    assert str(size) in reason and aborted


def test_frames_before_deliver_to_are_read_one_by_one_then_handed_over() -> None:
    async def main() -> None:
        reader = FrameReader(1 << 20)
        _feed(reader, _framed(b"\x00\x00\x00\x01a") + _framed(b"\x00\x00\x00\x02b"), 1 << 20)
        assert await reader.read_frame() == b"\x00\x00\x00\x01a"
        later: list[Frame] = []
        reader.deliver_to(later.append)
        assert later == [b"\x00\x00\x00\x02b"]
        reader.connection_lost(None)
        reader.deliver_to(lambda frame: None)
        with pytest.raises(ConnectionResetError):
            await reader.read_frame()

    asyncio.run(main())


class _PausingTransport(_Transport):
    """Records pause_reading/resume_reading as the selector transport would apply them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")

    def is_closing(self) -> bool:
        return False


def test_a_listener_connection_pauses_reading_while_read_ahead_frames_wait_and_hands_out_bytearrays() -> None:
    """A listener's connection (io/server.py): reading pauses once ``pause_at_bytes`` of complete
    requests wait behind the one in progress (Kafka mutes the channel) and resumes when they are taken;
    every frame, small ones from the scratch too, is a bytearray the produce path may rewrite."""

    async def main() -> None:
        reader = FrameReader(1 << 20, mutable=True, pause_at_bytes=100)
        transport = _PausingTransport()
        reader.connection_made(transport)
        _feed(reader, _framed(b"\x00\x00\x00\x01" + b"a" * 60), 1 << 20)
        assert transport.calls == []  # 64 bytes wait: under the mark
        _feed(reader, _framed(b"\x00\x00\x00\x02" + b"b" * 60), 1 << 20)
        assert transport.calls == ["pause"]  # 128 bytes wait
        first = await reader.read_frame()
        assert isinstance(first, bytearray) and first[:4] == b"\x00\x00\x00\x01"
        assert transport.calls == ["pause", "resume"]  # 64 bytes wait again
        second = await reader.read_frame()
        assert isinstance(second, bytearray) and second[:4] == b"\x00\x00\x00\x02"
        assert transport.calls == ["pause", "resume"]

    asyncio.run(main())


def test_drain_waits_for_resume_writing_and_fails_once_the_connection_is_lost() -> None:
    async def main() -> None:
        reader = FrameReader(1 << 20)
        reader.connection_made(_Transport())
        await reader.drain()  # not paused: returns at once
        reader.pause_writing()
        drained = asyncio.ensure_future(reader.drain())
        await asyncio.sleep(0)
        assert not drained.done()
        reader.resume_writing()
        await drained
        reader.pause_writing()
        lost = asyncio.ensure_future(reader.drain())
        await asyncio.sleep(0)
        reader.connection_lost(None)
        with pytest.raises(ConnectionResetError):
            await lost

    asyncio.run(main())


def test_a_size_prefix_alone_allocates_at_most_the_first_buffer_and_a_huge_frame_still_arrives_whole() -> (
    None
):
    """socket.request.max.bytes is 100 MiB: a frame's buffer starts at LARGE_FRAME_FIRST_BYTES and
    doubles as its bytes arrive, so four bytes from a client never reserve 100 MiB."""

    async def main() -> None:
        size = 3 * LARGE_FRAME_FIRST_BYTES + 5
        reader = FrameReader(100 << 20)
        got: list[Frame] = []
        reader.deliver_to(got.append)
        _feed(reader, struct.pack(">i", size) + b"\x00\x00\x00\x01", 1 << 20)
        assert len(reader.get_buffer(-1)) == LARGE_FRAME_FIRST_BYTES - 4
        body = bytes(range(251)) * (size // 251) + bytes(size % 251)
        _feed(reader, body[4:], 3 << 20)
        assert len(got) == 1 and got[0] == b"\x00\x00\x00\x01" + body[4:]

    asyncio.run(main())
