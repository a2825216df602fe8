"""The event queue of the small simulations (broker_sim, replication_sim): actions due at a time, run in
time order and, at equal times, in the order they were scheduled, so a seed replays exactly."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class _Event:
    at_ms: int
    seq: int
    action: Callable[[], None] = field(compare=False)


class EventQueue:
    def __init__(self) -> None:
        self._events: list[_Event] = []
        self.seq = 0

    def at(self, at_ms: int, action: Callable[[], None]) -> int:
        """Schedule ``action`` at ``at_ms``; returns its sequence number (unique, increasing)."""
        self.seq += 1
        heapq.heappush(self._events, _Event(at_ms, self.seq, action))
        return self.seq

    def run_due(self, now_ms: int) -> None:
        while self._events and self._events[0].at_ms <= now_ms:
            heapq.heappop(self._events).action()
