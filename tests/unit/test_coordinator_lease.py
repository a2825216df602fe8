"""The broker's coordinator read lease (broker/coordinator_lease.py, issue 32)."""

from __future__ import annotations

from pykraft.broker.coordinator_lease import CoordinatorLease

TIMEOUT_MS = 3000


def _caught_up(lease: CoordinatorLease, answered_ms: int, high_watermark: int = 50) -> None:
    """An unfenced heartbeat answered at ``answered_ms``, then a metadata Fetch sent after it."""
    lease.on_heartbeat_answered(answered_ms - 5, answered_ms, is_fenced=False)
    lease.on_metadata_fetch_answered(answered_ms + 1, high_watermark)


def test_a_started_broker_holds_no_lease_until_a_heartbeat_and_a_fetch_after_it() -> None:
    lease = CoordinatorLease(TIMEOUT_MS)
    assert not lease.holds(0, 50)
    lease.on_heartbeat_answered(100, 110, is_fenced=False)
    assert not lease.holds(120, 50)  # its image on disk may be stale: no catch-up target yet
    lease.on_metadata_fetch_answered(105, 50)  # sent before the heartbeat was answered: not enough
    assert not lease.holds(130, 50)
    lease.on_metadata_fetch_answered(111, 60)
    assert not lease.holds(140, 59)  # the image is behind the high watermark
    assert lease.holds(150, 60)


def test_heartbeats_keep_the_lease_and_it_ends_a_session_timeout_after_the_last_one_was_sent() -> None:
    lease = CoordinatorLease(TIMEOUT_MS)
    _caught_up(lease, 1000)
    for sent in range(1500, 5000, 500):
        lease.on_heartbeat_answered(sent, sent + 400, is_fenced=False)  # answered late: sent counts
        assert lease.holds(sent + 450, 50)
    assert lease.holds(4500 + TIMEOUT_MS, 50)
    assert not lease.holds(4500 + TIMEOUT_MS + 1, 50)


def test_a_paused_broker_answers_nothing_on_resume_until_it_caught_up_again() -> None:
    """The paused-coordinator scenario: SIGSTOP at 2000 for 8 s; the queued requests are decided at
    10 000 (lease expired), and the next heartbeat's answer alone is not enough."""
    lease = CoordinatorLease(TIMEOUT_MS)
    _caught_up(lease, 1000)
    lease.on_heartbeat_answered(1990, 1995, is_fenced=False)
    assert lease.holds(1999, 50)
    assert not lease.holds(10_000, 50)  # resumed: the requests queued in its socket
    lease.on_heartbeat_answered(10_010, 10_020, is_fenced=False)  # unfenced again by the controller
    assert not lease.holds(10_021, 50)
    lease.on_metadata_fetch_answered(10_000, 80)  # a Fetch from before the answer (its reply was queued)
    assert not lease.holds(10_030, 80)
    lease.on_metadata_fetch_answered(10_025, 90)
    assert not lease.holds(10_040, 80)  # the records that moved its groups are not applied yet
    assert lease.holds(10_050, 90)


def test_a_lapse_nobody_asked_during_still_needs_a_catch_up() -> None:
    """No request came while the lease was out: the next heartbeat's send time shows the gap."""
    lease = CoordinatorLease(TIMEOUT_MS)
    _caught_up(lease, 1000)
    lease.on_heartbeat_answered(5000, 5010, is_fenced=False)  # sent after the lease ran out at 3995
    assert not lease.holds(5020, 50)
    lease.on_metadata_fetch_answered(5015, 50)
    assert lease.holds(5030, 50)


def test_a_fenced_answer_ends_the_lease_at_once() -> None:
    lease = CoordinatorLease(TIMEOUT_MS)
    _caught_up(lease, 1000)
    assert lease.holds(1100, 50)
    lease.on_heartbeat_answered(1200, 1210, is_fenced=True)
    assert not lease.holds(1220, 50)
    lease.on_metadata_fetch_answered(1230, 50)  # no unfenced answer yet: no catch-up target
    assert not lease.holds(1240, 50)
    _caught_up(lease, 1300)
    assert lease.holds(1310, 50)
