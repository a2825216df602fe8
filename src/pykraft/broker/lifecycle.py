"""A broker process's session with the active controller (KIP-631; Kafka's BrokerLifecycleManager).

Pure: the shell asks :meth:`BrokerLifecycle.poll` what to send (a registration or a heartbeat, to the
controller the metadata log names as leader), sends it, and feeds the answer back through
:meth:`on_registration_response`, :meth:`on_heartbeat_response` or :meth:`on_failure`. At most one
request is outstanding. The states are Kafka's:

    STARTING --registered--> RECOVERY (fenced, catching up) --unfenced--> RUNNING
       any --begin_controlled_shutdown--> PENDING_CONTROLLED_SHUTDOWN --should_shut_down--> SHUT_DOWN

A registration waits until the broker knows the cluster id (KIP-1262: a broker that was never formatted
learns it from the metadata log first). While fenced, heartbeats go out every
``RECOVERY_HEARTBEAT_INTERVAL_MS`` so the broker is unfenced soon after it catches up (Kafka sends them
at once while catching up); once running, every ``broker.heartbeat.interval.ms``.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from pykraft.core.errors import ErrorCode

UNKNOWN_CONTROLLER = -1
# Heartbeats while fenced (registered, catching up or in controlled shutdown).
RECOVERY_HEARTBEAT_INTERVAL_MS = 50
# After NOT_CONTROLLER or no answer: ask again (the raft leader may have moved) after this, doubling up
# to the heartbeat interval (Kafka's ExponentialBackoff for the lifecycle manager).
RETRY_BACKOFF_MS = 50
# With no known controller, look again after this long.
NO_CONTROLLER_POLL_MS = 50
# Registration errors that cannot get better by retrying: the process must stop.
FATAL_REGISTRATION_ERRORS = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.UNSUPPORTED_VERSION})


class BrokerState(enum.Enum):
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUT_DOWN = "SHUT_DOWN"


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """Send a BrokerRegistration (62) to ``controller_id``."""

    controller_id: int
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    """Send a BrokerHeartbeat (63) to ``controller_id``."""

    controller_id: int
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool


LifecycleRequest = RegisterBroker | SendHeartbeat


class BrokerLifecycle:
    def __init__(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        *,
        heartbeat_interval_ms: int,
        now_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.incarnation_id = incarnation_id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        self.is_caught_up = False
        self.is_fenced = True
        # Set when the controller refused the registration for good: one line for the operator, and
        # the error code it answered.
        self.fatal_error: str | None = None
        self.fatal_error_code = ErrorCode.NONE
        self._in_flight = False
        self._next_send_ms = now_ms
        self._failures = 0

    # --- what to do ---------------------------------------------------------------------------------

    def poll(
        self, now_ms: int, controller_id: int, cluster_id: str | None, metadata_offset: int
    ) -> LifecycleRequest | None:
        """The request to send now, if one is due; the caller must answer it with one ``on_*`` call."""
        if self._in_flight or self.state is BrokerState.SHUT_DOWN or self.fatal_error is not None:
            return None
        if now_ms < self._next_send_ms:
            return None
        if controller_id == UNKNOWN_CONTROLLER:
            self._next_send_ms = now_ms + NO_CONTROLLER_POLL_MS
            return None
        if self.state is BrokerState.STARTING:
            if cluster_id is None:  # KIP-1262: learn it from the log before registering
                self._next_send_ms = now_ms + NO_CONTROLLER_POLL_MS
                return None
            self._in_flight = True
            return RegisterBroker(controller_id, self.broker_id, cluster_id, self.incarnation_id)
        self._in_flight = True
        shutting_down = self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
        return SendHeartbeat(
            controller_id,
            self.broker_id,
            self.broker_epoch,
            metadata_offset,
            want_fence=False,
            want_shut_down=shutting_down,
        )

    def next_deadline_ms(self) -> int:
        return self._next_send_ms

    def serves_requests(self, *, listed_unfenced: bool) -> bool:
        """Whether the broker may answer clients yet. Kafka's BrokerServer enables request processing
        once the controller has unfenced this incarnation (BrokerLifecycleManager.initialUnfenceFuture,
        which follows initialCatchUpFuture). ``listed_unfenced``: the broker's own metadata image lists
        it unfenced as well. The controller answers the unfencing heartbeat before that record reaches
        the broker's image, and the requests that waited for this moment would be answered in between:
        after a full-cluster restart, with the other brokers still fenced, a Metadata answer then names
        no broker at all, and librdkafka (2.10 on) drops every broker it knew (issue 32, seed 63)."""
        return self.state is BrokerState.RUNNING and not self.is_fenced and listed_unfenced

    def begin_controlled_shutdown(self, now_ms: int) -> None:
        """Ask the controller to move leadership away before the process stops (want_shut_down). A
        broker that never registered has nothing to hand over."""
        if self.state is BrokerState.STARTING:
            self.state = BrokerState.SHUT_DOWN
            return
        if self.state in (BrokerState.RECOVERY, BrokerState.RUNNING):
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            self._next_send_ms = now_ms

    # --- answers -----------------------------------------------------------------------------------

    def on_registration_response(self, error_code: int, broker_epoch: int, now_ms: int) -> None:
        assert self._in_flight, "a registration answer with no registration in flight"
        self._in_flight = False
        error = ErrorCode(error_code)
        if error is ErrorCode.NONE:
            self._failures = 0
            self.broker_epoch = broker_epoch
            if self.state is BrokerState.STARTING:
                self.state = BrokerState.RECOVERY
            self._next_send_ms = now_ms  # the first heartbeat at once
            return
        if error in FATAL_REGISTRATION_ERRORS:
            self.fatal_error_code = error
            self.fatal_error = f"the controller refused broker {self.broker_id}'s registration: {error.name}"
            return
        self._back_off(now_ms)

    def on_heartbeat_response(
        self,
        error_code: int,
        *,
        is_caught_up: bool,
        is_fenced: bool,
        should_shut_down: bool,
        now_ms: int,
    ) -> None:
        assert self._in_flight, "a heartbeat answer with no heartbeat in flight"
        self._in_flight = False
        error = ErrorCode(error_code)
        if error is not ErrorCode.NONE:
            if error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
                # Our registration is gone or replaced (a new active controller that never saw it
                # commit): register again, with the same incarnation id.
                self.state = BrokerState.STARTING
                self.broker_epoch = -1
                self.is_fenced = True
            self._back_off(now_ms)
            return
        self._failures = 0
        self.is_caught_up = is_caught_up
        self.is_fenced = is_fenced
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if should_shut_down:
                self.state = BrokerState.SHUT_DOWN
                return
            self._next_send_ms = now_ms + RECOVERY_HEARTBEAT_INTERVAL_MS
            return
        self.state = BrokerState.RECOVERY if is_fenced else BrokerState.RUNNING
        interval = RECOVERY_HEARTBEAT_INTERVAL_MS if is_fenced else self.heartbeat_interval_ms
        self._next_send_ms = now_ms + interval

    def on_failure(self, now_ms: int) -> None:
        """No answer (timeout, disconnect, NOT_CONTROLLER at the transport level): try again soon."""
        assert self._in_flight, "a failure with no request in flight"
        self._in_flight = False
        self._back_off(now_ms)

    def _back_off(self, now_ms: int) -> None:
        self._failures += 1
        backoff = min(self.heartbeat_interval_ms, RETRY_BACKOFF_MS * 2 ** min(self._failures - 1, 10))
        self._next_send_ms = now_ms + backoff
