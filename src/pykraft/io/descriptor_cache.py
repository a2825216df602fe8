"""A bounded cache of open segment files shared by every partition of a node (issue 29).

Kafka keeps every segment of every partition open; a process has a fixed number of descriptors
(RLIMIT_NOFILE), so a node with more partitions than that fails as a whole. Here a segment's log file is
opened on demand and kept in one least-recently-used cache of at most ``capacity`` descriptors
(``log.open.files.max``, by default half of the soft RLIMIT_NOFILE read at start-up, the other half left
to sockets, index and checkpoint files and Python itself); the least recently used one is closed when a
new one is needed and reopened transparently when it is used again. A partition being written to keeps
touching its active segment, so that one stays open.

Running out of descriptors (EMFILE, ENFILE) is never a log-dir failure: an ``open`` that hits it closes
idle cached descriptors (and lowers the capacity so they are not taken back at once) and retries; only
when the cache has nothing left to close does it raise ``DescriptorShortageError``, which the replica
manager answers as a retriable error without taking the dir offline. One log line per shortage episode.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
import time
from collections import OrderedDict

from pykraft.log.store import DescriptorShortageError

log = logging.getLogger(__name__)

# Never shrink below this many cached descriptors (a handful of partitions keep working).
MIN_CAPACITY = 8
SHORTAGE_ERRNOS = (errno.EMFILE, errno.ENFILE)
# One log line per this many seconds of shortage.
SHORTAGE_REPORT_S = 10.0


def default_capacity() -> int:
    """Half of the soft RLIMIT_NOFILE (an unlimited one counts as 65,536)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 65536
    return max(MIN_CAPACITY, soft // 2)


def is_shortage(exc: OSError) -> bool:
    return exc.errno in SHORTAGE_ERRNOS


class DescriptorCache:
    """Open segment logs of many stores, each keyed ``(owner, base_offset)``; at most ``capacity``.

    One node's event loop uses it (each in-process node has its own), and the threads of a clean
    shutdown closing logs in parallel (``pykraft.io.log_dirs``): every change is made under one lock."""

    def __init__(self, capacity: int) -> None:
        assert capacity >= 1, capacity
        self.capacity = capacity
        self._configured_capacity = capacity
        self._fds: OrderedDict[tuple[int, int], int] = OrderedDict()
        # The bases each owner has open, so a store closes or deletes only its own.
        self._by_owner: dict[int, set[int]] = {}
        # Counters for tests and metrics: descriptors opened, closed for room, and shortages met.
        self.opened = 0
        self.evicted = 0
        self.shortages = 0
        self.sheds = 0
        # Bytes read from segment logs by the stores using this cache (a clean restart reads none).
        self.segment_bytes_read = 0
        self._last_report = float("-inf")
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._fds)

    def get(self, owner: int, base_offset: int) -> int | None:
        """The cached descriptor, now the most recently used; None when it is not open."""
        key = (owner, base_offset)
        with self._lock:
            fd = self._fds.get(key)
            if fd is not None:
                self._fds.move_to_end(key)
            return fd

    def open_cached(self, owner: int, base_offset: int, path: str, flags: int, mode: int = 0o644) -> int:
        """Open ``path`` and keep it as ``(owner, base_offset)``, closing the least recently used
        descriptors past the capacity."""
        with self._lock:
            while len(self._fds) >= self.capacity:
                self._evict_oldest()
            fd = self.open_transient(path, flags, mode)
            self._fds[(owner, base_offset)] = fd
            self._by_owner.setdefault(owner, set()).add(base_offset)
            return fd

    def open_transient(self, path: str, flags: int, mode: int = 0o644) -> int:
        """``os.open`` for a descriptor the caller closes itself (index, checkpoint, directory): a
        shortage closes idle cached descriptors and retries."""
        while True:
            try:
                fd = os.open(path, flags, mode)
            except OSError as exc:
                if not is_shortage(exc):
                    raise
                if not self.shed():
                    with self._lock:
                        self.shortages += 1
                    raise DescriptorShortageError(
                        exc.errno, f"{exc.strerror} (no idle segment file left to close)", path
                    ) from None
                continue
            with self._lock:
                self.opened += 1
            return fd

    def shed(self) -> bool:
        """Descriptors ran out: close a quarter of the cached ones (at least one) and keep the capacity
        at what is left, so the rest of the process (sockets) gets them. False when none is cached."""
        with self._lock:
            if not self._fds:
                return False
            keep = len(self._fds) - max(1, len(self._fds) // 4)
            self.sheds += 1
            now = time.monotonic()
            if now - self._last_report >= SHORTAGE_REPORT_S:
                self._last_report = now
                log.warning(
                    "out of file descriptors: closing %d idle segment file(s), keeping at most %d open "
                    "(log.open.files.max=%d)",
                    len(self._fds) - keep,
                    max(keep, MIN_CAPACITY),
                    self._configured_capacity,
                )
            self.capacity = max(MIN_CAPACITY, keep)
            while len(self._fds) > keep:
                self._evict_oldest()
            return True

    def _evict_oldest(self) -> None:
        (owner, base_offset), fd = self._fds.popitem(last=False)
        self._forget(owner, base_offset)
        self.evicted += 1
        os.close(fd)

    def _forget(self, owner: int, base_offset: int) -> None:
        bases = self._by_owner.get(owner)
        if bases is not None:
            bases.discard(base_offset)
            if not bases:
                del self._by_owner[owner]

    def close(self, owner: int, base_offset: int) -> None:
        """Close one descriptor if it is open (its segment is deleted or replaced)."""
        with self._lock:
            fd = self._fds.pop((owner, base_offset), None)
            if fd is not None:
                self._forget(owner, base_offset)
                os.close(fd)

    def close_owner(self, owner: int) -> None:
        """Close every descriptor of one store."""
        with self._lock:
            for base_offset in list(self._by_owner.get(owner, ())):
                self.close(owner, base_offset)
