"""A broker's coordinator read lease (issue 32): whether its group coordinator may answer at ``now_ms``.

A broker whose last acknowledged heartbeat to the controller was sent more than
``broker.session.timeout.ms`` ago may have been fenced meanwhile, and the ``__consumer_offsets``
partitions it leads moved to other brokers that took commits since. Its image cannot show that until it
reads the metadata log again, so until then it answers group and offset requests with NOT_COORDINATOR
(retriable: the client looks the coordinator up again) instead of serving offsets from a state that may
be stale. Example: a coordinator paused (SIGSTOP) past the session timeout answers the OffsetFetch
requests queued in its socket the moment it resumes, before it has fetched the records that moved its
groups away.

Why a heartbeat's *send* time: the controller fences a broker no earlier than
``broker.session.timeout.ms`` after it *received* its last heartbeat, which is after the broker sent
it, so while the lease holds the controller has not fenced the broker (the broker's clock and the
controller's advance at the same rate; they are one host's clock in every deployment we test).

Why catching up after a lapse: the heartbeat that ends a lapse may be answered by a controller that
fenced the broker before it (and moved its leaderships): an unfenced answer comes only after the
unfencing record committed, which is after the fencing and the leader changes. A metadata Fetch sent
after that answer returns a high watermark at least that far; once the image has applied up to it, the
broker knows where its groups are. Until the first such Fetch is answered and applied, the lease does
not hold. A broker that just started is in the same position (its image on disk may name it the leader
of partitions that moved while it was down).

Kafka's coordinators hold no such lease (a paused Kafka coordinator answers the same way pykraft did);
this closes a window the fault campaign found (tests/faults, bench/results/faults.md).

Pure: the shell reports each heartbeat answer (:meth:`on_heartbeat_answered`) and each metadata Fetch
answer (:meth:`on_metadata_fetch_answered`) with their times, and asks :meth:`holds`.
"""

from __future__ import annotations


class CoordinatorLease:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        # The lease holds until this time (the last unfenced heartbeat's send time + the session timeout).
        self.valid_until_ms: int | None = None
        # True from start and from any lapse until the image has caught up again.
        self.lapsed = True
        # After a lapse: when the heartbeat that renewed the lease was answered, and the metadata offset
        # the image must reach (the high watermark of a metadata Fetch sent after that answer).
        self._renewed_at_ms: int | None = None
        self._catch_up_offset: int | None = None

    def on_heartbeat_answered(self, sent_ms: int, answered_ms: int, *, is_fenced: bool) -> None:
        """A BrokerHeartbeat sent at ``sent_ms`` was answered without error at ``answered_ms``. A fenced
        broker's leaderships are moving away: its lease ends there."""
        if is_fenced:
            self._lapse()
            self.valid_until_ms = None
            return
        if self.valid_until_ms is not None and sent_ms > self.valid_until_ms:
            self._lapse()  # the lease ran out before this heartbeat even went out
        self.valid_until_ms = max(self.valid_until_ms or sent_ms, sent_ms + self.session_timeout_ms)
        if self.lapsed and self._renewed_at_ms is None:
            self._renewed_at_ms = answered_ms

    def on_metadata_fetch_answered(self, sent_ms: int, high_watermark: int) -> None:
        """A Fetch of the metadata log sent at ``sent_ms`` was answered with ``high_watermark``."""
        if (
            self.lapsed
            and self._renewed_at_ms is not None
            and self._catch_up_offset is None
            and sent_ms >= self._renewed_at_ms
            and high_watermark >= 0
        ):
            self._catch_up_offset = high_watermark

    def holds(self, now_ms: int, applied_end_offset: int) -> bool:
        """May the group coordinator answer now? ``applied_end_offset``: the offset after the last
        metadata record in the broker's image."""
        if self.valid_until_ms is None or now_ms > self.valid_until_ms:
            self._lapse()
            return False
        if self.lapsed:
            if self._catch_up_offset is None or applied_end_offset < self._catch_up_offset:
                return False
            self.lapsed = False
            self._renewed_at_ms = None
            self._catch_up_offset = None
        return True

    def _lapse(self) -> None:
        """The lease ran out (or ends): any catch-up from before no longer counts."""
        self.lapsed = True
        self._renewed_at_ms = None
        self._catch_up_offset = None
