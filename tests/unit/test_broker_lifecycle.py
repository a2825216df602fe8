"""The broker's session with the active controller (broker/lifecycle.py, KIP-631): register once the
cluster id is known, heartbeat fast while fenced and at the interval once unfenced, one request in
flight, back off on failure, register again when the registration is gone, controlled shutdown."""

from __future__ import annotations

import uuid

from pykraft.broker.lifecycle import (
    RECOVERY_HEARTBEAT_INTERVAL_MS,
    RETRY_BACKOFF_MS,
    BrokerLifecycle,
    BrokerState,
    RegisterBroker,
    SendHeartbeat,
)
from pykraft.core.errors import ErrorCode

INCARNATION = uuid.UUID(int=7)
INTERVAL_MS = 2000


def _lifecycle() -> BrokerLifecycle:
    return BrokerLifecycle(101, INCARNATION, heartbeat_interval_ms=INTERVAL_MS, now_ms=0)


def _registered(now_ms: int = 0, epoch: int = 12) -> BrokerLifecycle:
    lifecycle = _lifecycle()
    assert isinstance(lifecycle.poll(now_ms, 1, "cid", 0), RegisterBroker)
    lifecycle.on_registration_response(ErrorCode.NONE, epoch, now_ms)
    return lifecycle


def test_registers_only_once_the_cluster_id_and_a_controller_are_known() -> None:
    lifecycle = _lifecycle()
    assert lifecycle.poll(0, 1, None, 0) is None  # KIP-1262: learn the id from the log first
    assert lifecycle.poll(100, -1, "cid", 0) is None  # no controller known
    request = lifecycle.poll(200, 3, "cid", 0)
    assert request == RegisterBroker(3, 101, "cid", INCARNATION)
    assert lifecycle.poll(200, 3, "cid", 0) is None  # one request in flight


def test_heartbeats_fast_while_fenced_then_at_the_interval_once_unfenced() -> None:
    lifecycle = _registered(now_ms=0, epoch=12)
    assert lifecycle.state is BrokerState.RECOVERY
    first = lifecycle.poll(0, 1, "cid", 5)
    assert first == SendHeartbeat(1, 101, 12, 5, want_fence=False, want_shut_down=False)
    lifecycle.on_heartbeat_response(0, is_caught_up=False, is_fenced=True, should_shut_down=False, now_ms=0)
    assert lifecycle.next_deadline_ms() == RECOVERY_HEARTBEAT_INTERVAL_MS
    assert lifecycle.poll(RECOVERY_HEARTBEAT_INTERVAL_MS - 1, 1, "cid", 12) is None
    assert isinstance(lifecycle.poll(RECOVERY_HEARTBEAT_INTERVAL_MS, 1, "cid", 12), SendHeartbeat)
    lifecycle.on_heartbeat_response(0, is_caught_up=True, is_fenced=False, should_shut_down=False, now_ms=50)
    assert lifecycle.state is BrokerState.RUNNING and not lifecycle.is_fenced
    assert lifecycle.next_deadline_ms() == 50 + INTERVAL_MS


def test_no_answer_backs_off_exponentially_up_to_the_interval() -> None:
    lifecycle = _registered()
    deadlines = []
    now = 0
    for _ in range(8):
        assert lifecycle.poll(now, 1, "cid", 0) is not None
        lifecycle.on_failure(now)
        deadlines.append(lifecycle.next_deadline_ms() - now)
        now = lifecycle.next_deadline_ms()
    assert deadlines[:3] == [RETRY_BACKOFF_MS, 2 * RETRY_BACKOFF_MS, 4 * RETRY_BACKOFF_MS]
    assert deadlines[-1] == INTERVAL_MS


def test_a_stale_epoch_registers_again_with_the_same_incarnation() -> None:
    lifecycle = _registered(epoch=12)
    assert lifecycle.poll(0, 1, "cid", 12) is not None
    lifecycle.on_heartbeat_response(
        ErrorCode.STALE_BROKER_EPOCH, is_caught_up=False, is_fenced=True, should_shut_down=False, now_ms=0
    )
    assert lifecycle.state is BrokerState.STARTING and lifecycle.broker_epoch == -1
    request = lifecycle.poll(lifecycle.next_deadline_ms(), 2, "cid", 12)
    assert request == RegisterBroker(2, 101, "cid", INCARNATION)


def test_not_controller_keeps_the_session_and_asks_again() -> None:
    lifecycle = _registered(epoch=12)
    assert lifecycle.poll(0, 1, "cid", 12) is not None
    lifecycle.on_heartbeat_response(
        ErrorCode.NOT_CONTROLLER, is_caught_up=False, is_fenced=False, should_shut_down=False, now_ms=0
    )
    assert lifecycle.state is BrokerState.RECOVERY and lifecycle.broker_epoch == 12
    assert isinstance(lifecycle.poll(lifecycle.next_deadline_ms(), 2, "cid", 12), SendHeartbeat)


def test_an_inconsistent_cluster_id_is_fatal() -> None:
    lifecycle = _lifecycle()
    assert lifecycle.poll(0, 1, "mine", 0) is not None
    lifecycle.on_registration_response(ErrorCode.INCONSISTENT_CLUSTER_ID, -1, 0)
    assert lifecycle.fatal_error_code is ErrorCode.INCONSISTENT_CLUSTER_ID
    assert lifecycle.fatal_error is not None and "INCONSISTENT_CLUSTER_ID" in lifecycle.fatal_error
    assert lifecycle.poll(10_000, 1, "mine", 0) is None


def test_controlled_shutdown_asks_until_the_controller_says_it_may_stop() -> None:
    lifecycle = _registered(epoch=12)
    assert lifecycle.poll(0, 1, "cid", 12) is not None
    lifecycle.on_heartbeat_response(0, is_caught_up=True, is_fenced=False, should_shut_down=False, now_ms=0)
    lifecycle.begin_controlled_shutdown(10)
    request = lifecycle.poll(10, 1, "cid", 13)
    assert isinstance(request, SendHeartbeat) and request.want_shut_down
    lifecycle.on_heartbeat_response(0, is_caught_up=True, is_fenced=True, should_shut_down=False, now_ms=10)
    assert lifecycle.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    request = lifecycle.poll(10 + RECOVERY_HEARTBEAT_INTERVAL_MS, 1, "cid", 14)
    assert isinstance(request, SendHeartbeat) and request.want_shut_down
    lifecycle.on_heartbeat_response(0, is_caught_up=True, is_fenced=True, should_shut_down=True, now_ms=70)
    assert lifecycle.state is BrokerState.SHUT_DOWN
    assert lifecycle.poll(10_000, 1, "cid", 14) is None


def test_a_broker_that_never_registered_shuts_down_at_once() -> None:
    lifecycle = _lifecycle()
    lifecycle.begin_controlled_shutdown(0)
    assert lifecycle.state is BrokerState.SHUT_DOWN


def test_serves_requests_once_unfenced_and_listed_unfenced_in_its_own_image() -> None:
    """Kafka serves once the controller has unfenced the broker (initialUnfenceFuture); the controller
    answers that heartbeat before the unfencing record reaches the broker's image, and requests that
    waited for the moment were answered from an image without the broker: after a full-cluster restart
    their Metadata named no broker at all, and librdkafka dropped every broker it knew (issue 32, seed
    63: a KIP-848 consumer's synchronous commit never returned)."""
    lifecycle = _registered(epoch=12)
    assert not lifecycle.serves_requests(listed_unfenced=True)  # registered, fenced
    assert lifecycle.poll(0, 1, "cid", 12) is not None
    lifecycle.on_heartbeat_response(0, is_caught_up=True, is_fenced=True, should_shut_down=False, now_ms=0)
    assert not lifecycle.serves_requests(listed_unfenced=True)  # caught up, still fenced
    assert lifecycle.poll(RECOVERY_HEARTBEAT_INTERVAL_MS, 1, "cid", 12) is not None
    lifecycle.on_heartbeat_response(0, is_caught_up=True, is_fenced=False, should_shut_down=False, now_ms=50)
    assert not lifecycle.serves_requests(listed_unfenced=False)  # unfenced; the image does not say so yet
    assert lifecycle.serves_requests(listed_unfenced=True)
