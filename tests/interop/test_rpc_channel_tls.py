"""The inter-node RPC channel reads answers with io.frame_reader.FrameReader, a BufferedProtocol, on
plaintext and on TLS transports alike (issue 29 item 4): answers of every size -- a follower's 1 MiB
replica Fetch answer, larger ones, small ones between them -- arrive byte for byte the same over both."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from pykraft.core.config import InterNodeSecurity, SslConfig
from pykraft.io.frame_reader import SCRATCH_BYTES
from pykraft.io.rpc_channel import Answered, ChannelEvent, ChannelSecurity, PeerChannel
from pykraft.io.tls import client_context, server_context

# Answer body sizes (after the correlation id), one request each.
SIZES = [10, (1 << 20) - 4, 3 << 20, 0, SCRATCH_BYTES - 8, SCRATCH_BYTES, 70_000, 5]


def _body(correlation_id: int, size: int) -> bytes:
    pattern = bytes((correlation_id * 7 + i) % 251 for i in range(251))
    return (pattern * (size // 251 + 1))[:size]


def _answers(ssl_config: SslConfig | None) -> list[bytes]:
    async def main() -> list[bytes]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    frame = await reader.readexactly(size)
                    (correlation_id,) = struct.unpack_from(">i", frame, 4)
                    body = struct.pack(">i", correlation_id) + _body(correlation_id, SIZES[correlation_id])
                    writer.write(struct.pack(">i", len(body)) + body)
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        server = await asyncio.start_server(
            handle, "127.0.0.1", 0, ssl=server_context(ssl_config) if ssl_config else None
        )
        port = server.sockets[0].getsockname()[1]
        security = (
            ChannelSecurity(client_context(ssl_config), InterNodeSecurity(security_protocol="SSL"))
            if ssl_config
            else None
        )
        events: list[ChannelEvent] = []
        channel = PeerChannel(
            2, ("127.0.0.1", port), events.append, request_timeout_ms=10_000, security=security
        )
        try:
            for correlation_id in range(len(SIZES)):
                # A request header v1: api key 18, version 0, the correlation id, client id "t".
                channel.send(correlation_id, struct.pack(">hhih", 18, 0, correlation_id, 1) + b"t")
            deadline = asyncio.get_running_loop().time() + 10
            while len(events) < len(SIZES):
                assert asyncio.get_running_loop().time() < deadline, events
                await asyncio.sleep(0.01)
        finally:
            await channel.close()
            server.close()
            await server.wait_closed()
        assert all(isinstance(e, Answered) for e in events), events
        return [bytes(e.frame) for e in events if isinstance(e, Answered)]

    return asyncio.run(main())


def test_answers_of_every_size_are_the_same_over_plaintext_and_tls(certs: Path) -> None:
    expected = [struct.pack(">i", c) + _body(c, size) for c, size in enumerate(SIZES)]
    assert _answers(None) == expected
    tls = SslConfig(
        keystore_location=str(certs / "keystore.pem"),
        key_password="s3cret-pass",
        truststore_location=str(certs / "ca.pem"),
    )
    assert _answers(tls) == expected
