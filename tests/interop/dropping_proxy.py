"""A TCP proxy on 127.0.0.1 that sometimes loses Produce responses, so real clients retry.

Requests flow to the broker untouched. When a Produce response comes back the proxy may (seeded
coin) start a drop: it forwards no more responses on that connection while the client, hearing
nothing, keeps pipelining (up to its max in flight) and the broker appends; after a few Produce
responses (or a short time) it closes both sides. The client retries every in-flight batch: the
oldest ones are now older than the producer's latest batch on the broker, which is what KIP-758's
DUPLICATE_SEQUENCE_NUMBER (46) answers.

The proxy decodes the Produce responses it forwards and counts their error codes. With
``duplicate_probability`` it also turns some successful answers into the one KIP-758 gives a retried
older batch (46, offset -1) -- for an appended batch that is the truth, and it reaches the client even
when the client never has two batches of a partition in flight (then real retries only ever repeat the
latest batch, which is answered with its original offset). The node must advertise the proxy's port (advertised.listeners)
so that every client connection goes through it.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections import Counter

from kafka.protocol.producer import ProduceResponse

PRODUCE = 0
# A drop swallows up to this many Produce responses (or waits this long), then closes.
SWALLOW_PRODUCE_RESPONSES = 4
SWALLOW_S = 0.3


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        try:
            chunk = sock.recv(size - len(buf))
        except TimeoutError:
            if not buf:
                raise  # nothing read yet: the caller may just poll again
            continue
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> bytes | None:
    size = _recv_exactly(sock, 4)
    if size is None:
        return None
    return _recv_exactly(sock, struct.unpack(">i", size)[0])


class DroppingProxy:
    def __init__(
        self,
        target_port: int,
        *,
        seed: int,
        drop_probability: float,
        max_drops: int,
        duplicate_probability: float = 0.0,
    ) -> None:
        self.target_port = target_port
        self.drop_probability = drop_probability
        self.duplicate_probability = duplicate_probability
        self.max_drops = max_drops
        self.drops = 0
        self.forwarded_produce_errors: Counter[int] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    def __enter__(self) -> DroppingProxy:
        self._spawn(self._accept_loop)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _close(sock)
        for thread in self._threads:
            thread.join(timeout=10)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream.settimeout(0.05)  # so a drop can end on time when no response comes
            with self._lock:
                self._sockets += [client, upstream]
            # correlation id -> (api key, api version) of requests whose response has not come back.
            pending: dict[int, tuple[int, int]] = {}
            self._spawn(self._requests, client, upstream, pending)
            self._spawn(self._responses, client, upstream, pending)

    def _requests(
        self, client: socket.socket, upstream: socket.socket, pending: dict[int, tuple[int, int]]
    ) -> None:
        while True:
            frame = _recv_frame(client)
            if frame is None:
                break
            api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
            with self._lock:
                pending[correlation_id] = (api_key, api_version)
            try:
                upstream.sendall(struct.pack(">i", len(frame)) + frame)
            except OSError:
                break
        _close(client)
        _close(upstream)

    def _responses(
        self, client: socket.socket, upstream: socket.socket, pending: dict[int, tuple[int, int]]
    ) -> None:
        swallowed = -1  # Produce responses lost so far in the current drop; -1 while forwarding
        deadline = 0.0
        while not self._stopped.is_set():
            if swallowed >= 0 and (swallowed >= SWALLOW_PRODUCE_RESPONSES or time.monotonic() > deadline):
                break  # the connection dies with all those responses unsent
            try:
                frame = _recv_frame(upstream)
            except TimeoutError:
                continue
            if frame is None:
                break
            (correlation_id,) = struct.unpack_from(">i", frame)
            with self._lock:
                api_key, api_version = pending.pop(correlation_id, (-1, -1))
                if (
                    swallowed < 0
                    and api_key == PRODUCE
                    and self.drops < self.max_drops
                    and self._rng.random() < self.drop_probability
                ):
                    self.drops += 1
                    swallowed, deadline = 0, time.monotonic() + SWALLOW_S
            if swallowed >= 0:
                # The client gets no response, so it keeps pipelining: its oldest in-flight batches
                # will be older than its latest appended one when it retries them all.
                swallowed += api_key == PRODUCE
                continue
            if api_key == PRODUCE:
                response = ProduceResponse.decode(frame, version=api_version, header=True)
                with self._lock:
                    rewrite = self._rng.random() < self.duplicate_probability
                    for topic in response.responses:
                        for partition in topic.partition_responses:
                            if rewrite and partition.error_code == 0:
                                # What the broker says of an appended batch older than the latest
                                # (KIP-758): DUPLICATE_SEQUENCE_NUMBER, no offset.
                                partition.error_code, partition.base_offset = 46, -1
                            self.forwarded_produce_errors[partition.error_code] += 1
                if rewrite:
                    frame = bytes(response.encode(header=True))
            try:
                client.sendall(struct.pack(">i", len(frame)) + frame)
            except OSError:
                break
        _close(client)
        _close(upstream)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
