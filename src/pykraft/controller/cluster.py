"""ClusterControlManager: broker registrations, broker epochs, fencing, and the KIP-1262 cluster id.

Rules (Kafka ``ClusterControlManager.java``):

1. A broker's epoch is the log offset of the RegisterBrokerRecord that registered its current
   incarnation; the caller passes it in as ``new_broker_epoch`` (the controller's next write offset).
2. Re-registering the same incarnation keeps the epoch and fencing state; a new incarnation gets a new
   epoch. (Kafka also refuses a new incarnation while the old one's heartbeat session is alive,
   DUPLICATE_BROKER_REGISTRATION; pykraft has no heartbeat sessions yet, so a new incarnation wins.)
3. Single-node shortcut: with ``unfence_on_register`` the registration is followed, in the same atomic
   result, by an UnfenceBrokerRecord. Kafka registers fenced and unfences on the first heartbeat that
   shows the broker caught up; the records on the log are the same kinds either way.
4. ``check_broker_epoch`` passes only for a registered broker with that exact epoch; a fenced broker
   passes too (kafka-facts.md §1.4: only registration plus epoch are checked).
5. Replay is the only mutation; a change for an unknown broker or a stale epoch raises
   ``MetadataReplayError``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pykraft.controller.features import SUPPORTED_FEATURES, FeatureControlManager
from pykraft.controller.result import ControllerResult
from pykraft.core.errors import ErrorCode
from pykraft.metadata.delta import registration_with_change
from pykraft.metadata.image import (
    DIRECTORY_ID_MIGRATING,
    DIRECTORY_ID_UNASSIGNED,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistration,
)
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    FenceBrokerRecord,
    MetadataReplayError,
    UnfenceBrokerRecord,
)


@dataclass(frozen=True, slots=True)
class BrokerRegistrationReply:
    error_code: ErrorCode
    broker_epoch: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    """BrokerHeartbeatResponse's fields (KIP-631)."""

    error_code: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


class BrokerHeartbeatTracker:
    """When each broker last heartbeated (Kafka's BrokerHeartbeatManager): soft state of the active
    controller, never in the metadata log; a new active controller gives every broker a fresh session."""

    def __init__(self) -> None:
        self._last_contact_ms: dict[int, int] = {}

    def touch(self, broker_id: int, now_ms: int) -> None:
        self._last_contact_ms[broker_id] = now_ms

    def forget(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)

    def expired(self, now_ms: int, session_timeout_ms: int) -> list[int]:
        """Brokers whose last heartbeat is older than ``session_timeout_ms``."""
        return sorted(b for b, t in self._last_contact_ms.items() if now_ms - t > session_timeout_ms)


class ClusterControlManager:
    def __init__(self, feature_control: FeatureControlManager, *, unfence_on_register: bool = True) -> None:
        self._feature_control = feature_control
        self._unfence_on_register = unfence_on_register
        self._brokers: dict[int, BrokerRegistration] = {}
        # KIP-1262: the cluster id the log carries (ClusterIdRecord); None until one is replayed.
        self._cluster_id: str | None = None

    # --- reads ----------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str | None:
        return self._cluster_id

    def registration(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def registrations(self) -> dict[int, BrokerRegistration]:
        return dict(self._brokers)

    def is_active(self, broker_id: int) -> bool:
        """Registered, unfenced and not shutting down: may lead and sit in an ISR (Kafka isActive)."""
        registration = self._brokers.get(broker_id)
        return (
            registration is not None and not registration.fenced and not registration.in_controlled_shutdown
        )

    def usable_broker_ids(self) -> list[int]:
        return sorted(broker_id for broker_id in self._brokers if self.is_active(broker_id))

    def default_directory(self, broker_id: int) -> uuid.UUID:
        """Kafka ClusterControlManager.defaultDir: the broker's only log dir, else UNASSIGNED/MIGRATING."""
        registration = self._brokers.get(broker_id)
        if registration is None:
            return DIRECTORY_ID_UNASSIGNED
        if not registration.log_dirs:
            return DIRECTORY_ID_MIGRATING
        if len(registration.log_dirs) == 1:
            return registration.log_dirs[0]
        return DIRECTORY_ID_UNASSIGNED

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> ErrorCode:
        """NONE if ``broker_id`` is registered with exactly ``broker_epoch``, else STALE_BROKER_EPOCH."""
        registration = self._brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    # --- generate -------------------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        listeners: Sequence[BrokerEndpoint],
        rack: str | None,
        now_ms: int,
        *,
        new_broker_epoch: int,
        log_dirs: Sequence[uuid.UUID] = (),
        supported_features: Sequence[BrokerFeature] = (),
        unfence: bool | None = None,
    ) -> ControllerResult[BrokerRegistrationReply]:
        """Records that register (or amend) broker ``broker_id``; the reply carries its broker epoch.
        ``unfence``: unfence at once (the in-process broker of a single node) or wait for a heartbeat
        that shows it caught up (a broker process, as Kafka); None = this manager's default."""
        assert now_ms >= 0  # reserved for heartbeat sessions (rule 2)
        assert new_broker_epoch >= 0
        if broker_id < 0:
            return ControllerResult(
                [], BrokerRegistrationReply(ErrorCode.INVALID_REQUEST, -1, "negative broker id")
            )
        metadata_version = self._feature_control.metadata_version
        features = tuple(supported_features) or supported_broker_features()
        error = _check_features(features, self._feature_control.finalized_versions())
        if error is not None:
            return ControllerResult([], BrokerRegistrationReply(ErrorCode.UNSUPPORTED_VERSION, -1, error))
        existing = self._brokers.get(broker_id)
        same_incarnation = existing is not None and existing.incarnation_id == incarnation_id
        registration = BrokerRegistration(
            broker_id=broker_id,
            incarnation_id=incarnation_id,
            broker_epoch=existing.broker_epoch
            if existing is not None and same_incarnation
            else new_broker_epoch,
            listeners=tuple(listeners),
            supported_features=features,
            rack=rack,
            # Kafka registers a new incarnation fenced; an amended registration keeps its state.
            fenced=existing.fenced if existing is not None and same_incarnation else True,
            in_controlled_shutdown=existing.in_controlled_shutdown
            if existing and same_incarnation
            else False,
            log_dirs=tuple(log_dirs),
        )
        records = [registration.to_record(metadata_version)]
        if (self._unfence_on_register if unfence is None else unfence) and registration.fenced:
            unfence = UnfenceBrokerRecord(id=broker_id, epoch=registration.broker_epoch)
            records.append(ApiMessageAndVersion.of(unfence))
        return ControllerResult(records, BrokerRegistrationReply(ErrorCode.NONE, registration.broker_epoch))

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        *,
        want_fence: bool,
        want_shut_down: bool,
    ) -> tuple[list[ApiMessageAndVersion], BrokerHeartbeatReply]:
        """BrokerHeartbeat (63): the fencing records it calls for and the reply (before replay).

        A fenced broker is unfenced once it is caught up: its metadata offset has reached its own
        registration record (whose offset is its broker epoch). ``want_fence`` fences it; a broker
        that wants to shut down is fenced and told it may (pykraft has no replicas to move leadership
        to yet, so controlled shutdown is immediate)."""
        error = self.check_broker_epoch(broker_id, broker_epoch)
        if error is not ErrorCode.NONE:
            return [], BrokerHeartbeatReply(error)
        registration = self._brokers[broker_id]
        caught_up = current_metadata_offset >= broker_epoch
        records: list[ApiMessageAndVersion] = []
        fenced = registration.fenced
        if (want_fence or want_shut_down) and not fenced:
            records.append(ApiMessageAndVersion.of(FenceBrokerRecord(id=broker_id, epoch=broker_epoch)))
            fenced = True
        elif fenced and caught_up and not want_fence and not want_shut_down:
            records.append(ApiMessageAndVersion.of(UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch)))
            fenced = False
        return records, BrokerHeartbeatReply(ErrorCode.NONE, caught_up, fenced, want_shut_down)

    def fence(self, broker_id: int) -> list[ApiMessageAndVersion]:
        """A FenceBrokerRecord for a registered, unfenced broker (its session expired); [] otherwise."""
        registration = self._brokers.get(broker_id)
        if registration is None or registration.fenced:
            return []
        return [ApiMessageAndVersion.of(FenceBrokerRecord(id=broker_id, epoch=registration.broker_epoch))]

    def restore(self, brokers: dict[int, BrokerRegistration], cluster_id: str | None) -> None:
        """Set the saved state (AbortTransactionRecord, and QuorumController.load_image)."""
        self._brokers = dict(brokers)
        self._cluster_id = cluster_id

    # --- replay ---------------------------------------------------------------------------------

    def replay_register_broker(self, record: Any) -> None:
        self._brokers[record.broker_id] = BrokerRegistration.from_record(record)

    def replay_unregister_broker(self, record: Any) -> None:
        self._registration_or_raise(record.broker_id, record.broker_epoch, "unregister")
        del self._brokers[record.broker_id]

    def replay_registration_change(
        self,
        broker_id: int,
        broker_epoch: int,
        fencing_change: int,
        in_controlled_shutdown_change: int = 0,
        log_dirs: Any = None,
    ) -> None:
        registration = self._registration_or_raise(broker_id, broker_epoch, "change")
        self._brokers[broker_id] = registration_with_change(
            registration, fencing_change, in_controlled_shutdown_change, log_dirs
        )

    def replay_cluster_id(self, record: Any) -> None:
        # KIP-1262: at most one unique cluster id in the log; the same value may repeat.
        if self._cluster_id is not None and self._cluster_id != record.cluster_id:
            raise MetadataReplayError(
                f"ClusterIdRecord {record.cluster_id!r} conflicts with cluster id {self._cluster_id!r}"
            )
        self._cluster_id = record.cluster_id

    def _registration_or_raise(self, broker_id: int, broker_epoch: int, action: str) -> BrokerRegistration:
        registration = self._brokers.get(broker_id)
        if registration is None:
            raise MetadataReplayError(
                f"cannot {action} broker {broker_id}: no registration found for that id"
            )
        if registration.broker_epoch != broker_epoch:
            raise MetadataReplayError(
                f"cannot {action} broker {broker_id}: no registration with epoch {broker_epoch} "
                f"(current epoch {registration.broker_epoch})"
            )
        return registration


def supported_broker_features() -> tuple[BrokerFeature, ...]:
    """The feature ranges a pykraft broker registers with (Kafka BrokerFeatures.supportedFeatures)."""
    return tuple(BrokerFeature(name, low, high) for name, (low, high) in SUPPORTED_FEATURES.items())


def _check_features(features: Sequence[BrokerFeature], finalized: dict[str, int]) -> str | None:
    """Every finalized feature level must be inside the broker's supported range (Kafka
    processRegistrationFeature); a feature the broker does not list is supported only at level 0."""
    supported = {feature.name: feature for feature in features}
    for name, level in sorted(finalized.items()):
        feature = supported.get(name)
        if feature is None:
            if level != 0:
                return f"Unable to register because the broker does not support finalized version {level} of {name}."
            continue
        if not feature.min_supported_version <= level <= feature.max_supported_version:
            return (
                f"Unable to register because the broker does not support finalized version {level} of {name}. "
                f"The broker supports versions {feature.min_supported_version}-{feature.max_supported_version}."
            )
    return None
