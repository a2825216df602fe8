"""Per-topic encodings of a response, kept until the topic changes (issue 29 item 3).

A full Metadata answer lists every partition; building and encoding it per request cost ~8 us per
partition. A topic's entry depends only on the topic (its partitions' leaders, epochs, replicas, ISR),
the response version, and which brokers are live on the request's listener (a leader that is not live
is answered as -1 with LEADER_NOT_AVAILABLE or LISTENER_NOT_FOUND). So each entry is encoded once per
version and kept with the topic's view it came from: the shell builds a new view only for a topic the
image's delta touched, and a new view (or a broker registration changing the live brokers) encodes it
again; every other topic's bytes are reused as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

# Sets of live brokers kept at once: one per listener whose brokers differ, and the previous image's
# while clients catch up (old ones are dropped first).
LIVE_SETS_MAX = 4


class EncodedTopics:
    """Encoded entries by topic name and ``variant`` (the version, and whatever else shapes the entry),
    per set of live brokers, each kept with the view object it encodes (a new object means the topic
    changed)."""

    def __init__(self) -> None:
        self._by_live: dict[Hashable, dict[tuple[str, Hashable], tuple[object, bytes]]] = {}
        # Encodings made (misses), for tests and the bench.
        self.encoded = 0

    def get(
        self, live: Hashable, name: str, variant: Hashable, view: object, encode: Callable[[], bytes]
    ) -> bytes:
        entries = self._by_live.get(live)
        if entries is None:
            while len(self._by_live) >= LIVE_SETS_MAX:
                del self._by_live[next(iter(self._by_live))]
            entries = self._by_live[live] = {}
        key = (name, variant)
        hit = entries.get(key)
        if hit is not None and hit[0] is view:
            return hit[1]
        data = encode()
        entries[key] = (view, data)
        self.encoded += 1
        return data

    def forget_except(self, names: Callable[[str], bool]) -> None:
        """Drop the entries of topics ``names`` no longer knows (deleted ones)."""
        for entries in self._by_live.values():
            for key in [key for key in entries if not names(key[0])]:
                del entries[key]

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_live.values())
