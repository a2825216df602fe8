"""A blocking raw Kafka client for tests: pykraft's BrokerConnection plus raw-frame helpers."""

from __future__ import annotations

import struct

from pykraft.io.kafka_connection import BrokerConnection, parse_host_port


class RawClient(BrokerConnection):
    def __init__(self, bootstrap: str, timeout_s: float = 10.0) -> None:
        super().__init__(*parse_host_port(bootstrap), client_id="raw-test", timeout_s=timeout_s)

    def __enter__(self) -> RawClient:
        return self

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        return self.receive_frame()

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
