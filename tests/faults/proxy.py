"""A byte-forwarding TCP proxy on 127.0.0.1 that the nemesis can cut, slow down or reset.

The fault campaign puts one in front of every broker's client listener (the broker advertises the
proxy's port, so clients and followers fetching from that broker come through it) and one on every
broker -> controller path (the broker's ``controller.quorum.voters`` name the proxies). A cut is a
black hole, not a refusal: bytes are read and thrown away and nothing is answered, so the far side
sees what a network partition looks like (timeouts), not a fast connection reset.
"""

from __future__ import annotations

import socket
import threading
import time


class FaultProxy:
    def __init__(self, target_port: int, name: str) -> None:
        self.target_port = target_port
        self.name = name
        self.cut = False
        self.latency_s = 0.0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stopped = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []

    def start(self) -> FaultProxy:
        self._spawn(self._accept_loop)
        return self

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        self.reset()
        for thread in self._threads:
            thread.join(timeout=5)

    # --- what the nemesis does -----------------------------------------------------------------------

    def set_cut(self, cut: bool) -> None:
        """Cut: every byte either way is dropped from now on; healing closes the black-holed
        connections so both sides reconnect afresh (as after a real partition, once TCP gives up)."""
        self.cut = cut
        if not cut:
            self.reset()

    def reset(self) -> None:
        """Drop every connection through the proxy now (both sides see the connection close)."""
        with self._lock:
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            _close(sock)

    # --- plumbing ----------------------------------------------------------------------------------------

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name=f"proxy-{self.name}")  # type: ignore[arg-type]
        self._threads = [t for t in self._threads if t.is_alive()]
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
            upstream: socket.socket | None = None
            if not self.cut:
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                except OSError:
                    _close(client)  # the node is down: refused, as connecting to it directly would be
                    continue
                upstream.settimeout(None)
                upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets.add(client)
                if upstream is not None:
                    self._sockets.add(upstream)
            if upstream is None:
                self._spawn(self._pump, client, None)
            else:
                self._spawn(self._pump, client, upstream)
                self._spawn(self._pump, upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket | None) -> None:
        while True:
            try:
                chunk = source.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            if self.cut or sink is None:
                continue  # black hole
            if self.latency_s:
                time.sleep(self.latency_s)
            try:
                sink.sendall(chunk)
            except OSError:
                break
        with self._lock:
            self._sockets.discard(source)
            if sink is not None:
                self._sockets.discard(sink)
        _close(source)
        if sink is not None:
            _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
