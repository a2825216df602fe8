"""QuorumController: the pure controller core, composed of managers.

Rules (Kafka ``QuorumController.java``; anchors.md §3.5-§3.6):

1. Single owner: the shell calls it from one event loop; there are no locks.
2. An operation asks a manager to generate a ``ControllerResult`` (the managers never mutate), then
   the controller replays those records at the offsets they will take in the metadata log
   (``next_write_offset`` onwards), as Kafka's active controller replays at append time. The shell
   must append the returned records, in order, as the next entries of the log; raft entries the
   controller does not replay (control records) are announced first with ``note_log_end_offset``.
   A new broker epoch is the offset of its RegisterBrokerRecord, i.e. ``next_write_offset``.
3. ``replay(record, offset)`` is the only mutation, and the same code serves the active controller, a
   follower replaying committed records and a snapshot load.
4. On an empty log the first active controller writes ``bootstrap_records()``: a metadata transaction
   (metadata.version >= 3.6-IV1) holding FeatureLevelRecord(metadata.version) and, once KIP-1262 is
   wired in, the ClusterIdRecord. A bootstrap transaction cut short by a failover is aborted on the
   next activation (Kafka ActivationRecordsGenerator).

Not done yet (see the report): reverting speculative, uncommitted state when leadership is lost (Kafka's
timeline/SnapshotRegistry), heartbeats and fencing on session expiry, partition reassignment.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pykraft.controller.cluster import BrokerHeartbeatReply, BrokerRegistrationReply, ClusterControlManager
from pykraft.controller.configs import ConfigAlteration, ConfigAlterationResult, ConfigurationControlManager
from pykraft.controller.features import FeatureControlManager, FeatureUpdate, FeatureUpdateError
from pykraft.controller.producer_ids import (
    AllocateProducerIdsResult,
    ProducerIdControlManager,
    ProducerIdsBlock,
)
from pykraft.controller.quotas import (
    ClientQuotaAlteration,
    ClientQuotaAlterationResult,
    ClientQuotaControlManager,
)
from pykraft.controller.replication import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    DeletableTopicResult,
    ElectionResult,
    IsrChangeRequest,
    IsrChangeResult,
    OngoingTopicReassignment,
    ReassignableTopic,
    ReassignmentTopicResult,
    ReplicationControlManager,
    TopicControlInfo,
)
from pykraft.controller.result import ControllerResult
from pykraft.controller.security import (
    AclControlManager,
    AclCreationResult,
    AclDeletionResult,
    ScramAlterationResult,
    ScramControlManager,
    ScramDeletion,
    ScramUpsertion,
)
from pykraft.core.errors import ErrorCode
from pykraft.core.group_configs import KAFKA_GROUP_COORDINATOR_SETTINGS
from pykraft.core.quota_configs import QuotaEntity
from pykraft.metadata.delta import FENCING_CHANGE_FENCE, FENCING_CHANGE_UNFENCE
from pykraft.metadata.image import (
    SECURITY_PROTOCOL_PLAINTEXT,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistration,
    ConfigResource,
    MetadataImage,
)
from pykraft.metadata.records import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    ApiMessageAndVersion,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataReplayError,
    MetadataVersion,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from pykraft.security.acls import AclFilter, StandardAcl
from pykraft.security.scram import ScramCredential

T = TypeVar("T")

__all__ = [
    "AllocateProducerIdsResult",
    "BrokerRegistrationReply",
    "ControllerResult",
    "ControllerState",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "DeletableTopicResult",
    "QuorumController",
]

# The name Kafka gives the bootstrap metadata transaction (ActivationRecordsGenerator).
BOOTSTRAP_TRANSACTION_NAME = "Bootstrap records"


@dataclass(frozen=True, slots=True)
class ControllerState:
    """Everything replay builds, as plain values: equal states mean equal controllers."""

    next_write_offset: int
    transaction_start_offset: int
    finalized_versions: dict[str, int]
    cluster_id: str | None
    brokers: dict[int, BrokerRegistration]
    topics: dict[uuid.UUID, TopicControlInfo]
    configs: dict[ConfigResource, dict[str, str]]
    next_producer_block: ProducerIdsBlock
    producer_ids_broker_epoch: int
    scram_credentials: dict[tuple[str, int], ScramCredential]
    acls: dict[uuid.UUID, StandardAcl]
    client_quotas: dict[QuotaEntity, dict[str, float]]


class QuorumController:
    def __init__(
        self,
        *,
        rng: random.Random,
        node_id: int = 0,
        bootstrap_metadata_version: int = MetadataVersion.LATEST_PRODUCTION,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        unfence_on_register: bool = True,
        unclean_leader_election_enable: bool = False,
        group_settings: Mapping[str, int] = KAFKA_GROUP_COORDINATOR_SETTINGS,
    ) -> None:
        # This controller's node.id (for the shell's logs and future controller registration).
        self.node_id = node_id
        self.bootstrap_metadata_version = bootstrap_metadata_version
        self.feature_control = FeatureControlManager(node_id)
        self.cluster_control = ClusterControlManager(
            self.feature_control, unfence_on_register=unfence_on_register
        )
        # ``group_settings``: the group.consumer.* (...) values group configs are checked against.
        self.configuration_control = ConfigurationControlManager(group_settings)
        self.replication_control = ReplicationControlManager(
            feature_control=self.feature_control,
            cluster_control=self.cluster_control,
            configuration_control=self.configuration_control,
            rng=rng,
            default_num_partitions=default_num_partitions,
            default_replication_factor=default_replication_factor,
            unclean_leader_election_enable=unclean_leader_election_enable,
        )
        self.producer_id_control = ProducerIdControlManager(self.cluster_control)
        self.scram_control = ScramControlManager()
        self.acl_control = AclControlManager(rng)
        self.client_quota_control = ClientQuotaControlManager()
        # Records the first controller writes after metadata.version (``storage format --add-scram``).
        self.bootstrap_extra_records: list[ApiMessageAndVersion] = []
        # The offset the next appended record will take in the metadata log.
        self._next_write_offset = 0
        # Offset of an open BeginTransactionRecord, -1 when no metadata transaction is open.
        self._transaction_start_offset = -1
        # What an AbortTransactionRecord reverts to (Kafka reverts its timeline to the offset before Begin).
        self._pre_transaction_state: ControllerState | None = None
        # Only the active controller replays what it generates (rule 2). An inactive one (a follower, a
        # leader still applying its log) answers with records it must not apply: the shell refuses them
        # (NOT_CONTROLLER), and its state stays the committed log's.
        self.active = True

    # --- offsets --------------------------------------------------------------------------------

    @property
    def next_write_offset(self) -> int:
        return self._next_write_offset

    @property
    def transaction_start_offset(self) -> int:
        return self._transaction_start_offset

    def note_log_end_offset(self, log_end_offset: int) -> None:
        """Raft appended records the controller does not replay (control records); skip past them."""
        assert log_end_offset >= self._next_write_offset, "the metadata log never shrinks under a leader"
        self._next_write_offset = log_end_offset

    # --- activation -----------------------------------------------------------------------------

    def bootstrap_records(self, cluster_id: str | None = None) -> list[ApiMessageAndVersion]:
        """What the first active controller writes into an empty metadata log.

        KIP-1262 hook: pass ``cluster_id`` to write the ClusterIdRecord right after metadata.version, inside
        the same bootstrap transaction (N ActivationRecordsGeneratorTest: Begin, FeatureLevel, ClusterId, End).
        """
        level = self.bootstrap_metadata_version
        records = self.feature_control.generate_bootstrap_records(level)
        if cluster_id is not None:
            records.append(ApiMessageAndVersion.of(ClusterIdRecord(cluster_id=cluster_id)))
        records.extend(self.bootstrap_extra_records)
        if MetadataVersion.is_metadata_transaction_supported(level):
            begin = ApiMessageAndVersion.of(BeginTransactionRecord(name=BOOTSTRAP_TRANSACTION_NAME))
            end = ApiMessageAndVersion.of(EndTransactionRecord())
            records = [begin, *records, end]
        return records

    def activate(self, cluster_id: str | None = None) -> ControllerResult[None]:
        """Records to write on becoming the active controller, already replayed (rule 2).

        Kafka ActivationRecordsGenerator: an open metadata transaction left by the previous leader is
        aborted; if the log holds no metadata.version once that transaction is undone (a bootstrap cut
        short, or an empty log), the bootstrap records follow.
        """
        records: list[ApiMessageAndVersion] = []
        metadata_version = self.feature_control.metadata_version
        logged_cluster_id = self.cluster_control.cluster_id
        if self._transaction_start_offset != -1:
            records.append(ApiMessageAndVersion.of(AbortTransactionRecord(reason="Controller failover")))
            assert self._pre_transaction_state is not None
            metadata_version = self._pre_transaction_state.finalized_versions.get(
                MetadataVersion.FEATURE_NAME, 0
            )
            logged_cluster_id = self._pre_transaction_state.cluster_id
        if metadata_version == 0:
            records.extend(self.bootstrap_records(cluster_id))
        elif cluster_id is not None and logged_cluster_id is None:
            # KIP-1262: a log bootstrapped before pykraft wrote ClusterIdRecords gets its one id now.
            records.append(ApiMessageAndVersion.of(ClusterIdRecord(cluster_id=cluster_id)))
        return self._write(ControllerResult(records, None))

    # --- operations: generate, then replay at append time ----------------------------------------

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        listeners: Sequence[BrokerEndpoint | tuple[str, str, int]],
        rack: str | None,
        now_ms: int,
        *,
        log_dirs: Sequence[uuid.UUID] = (),
        supported_features: Sequence[BrokerFeature] = (),
        unfence: bool | None = None,
    ) -> ControllerResult[BrokerRegistrationReply]:
        # Kafka: the new broker epoch is the offset the RegisterBrokerRecord is written at.
        endpoints = [
            e
            if isinstance(e, BrokerEndpoint)
            else BrokerEndpoint(e[0], e[1], e[2], SECURITY_PROTOCOL_PLAINTEXT)
            for e in listeners
        ]
        result = self.cluster_control.register_broker(
            broker_id,
            incarnation_id,
            endpoints,
            rack,
            now_ms,
            new_broker_epoch=self._next_write_offset,
            log_dirs=log_dirs,
            supported_features=supported_features,
            unfence=unfence,
        )
        existing = self.cluster_control.registration(broker_id)
        restarted = existing is not None and existing.incarnation_id != incarnation_id and unfence is False
        if not restarted or not result.records:
            return self._write(result)
        # A broker process came back as a new incarnation (an unclean restart): it is fenced until it
        # heartbeats, so its leadership moves off it now (Kafka handleBrokerUncleanShutdown).
        written = self._write(ControllerResult(result.records, None)).records
        written += self._write(
            ControllerResult(self.replication_control.leave_fenced_broker(broker_id), None)
        ).records
        return ControllerResult(written, result.response)

    def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> ControllerResult[list[CreatableTopicResult]]:
        return self._write(self.replication_control.create_topics(topics, validate_only))

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], validate_only: bool = False
    ) -> ControllerResult[list[CreatePartitionsTopicResult]]:
        """CreatePartitions (api key 37, KIP-195): new partitions for existing topics."""
        return self._write(self.replication_control.create_partitions(topics, validate_only))

    def delete_topics(
        self,
        topics: Sequence[tuple[str | None, uuid.UUID | None]] = (),
        *,
        names: Sequence[str] = (),
        topic_ids: Sequence[uuid.UUID] = (),
    ) -> ControllerResult[list[DeletableTopicResult]]:
        """DeleteTopics: ``topics`` as (name, topic id) pairs (v6+: by id when the id is set), or
        ``names`` / ``topic_ids``."""
        by_name = list(names) + [name for name, topic_id in topics if topic_id is None and name is not None]
        by_id = list(topic_ids) + [topic_id for _, topic_id in topics if topic_id is not None]
        return self._write(self.replication_control.delete_topics(names=by_name, topic_ids=by_id))

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[AllocateProducerIdsResult]:
        """AllocateProducerIds (api key 67), KIP-730 (kafka-facts.md §1.4)."""
        return self._write(self.producer_id_control.generate_next_producer_id(broker_id, broker_epoch))

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        *,
        want_fence: bool = False,
        want_shut_down: bool = False,
    ) -> ControllerResult[BrokerHeartbeatReply]:
        """BrokerHeartbeat (63, KIP-631): unfence a caught-up broker, fence one that asks; a fenced
        broker's partitions move their leadership off it."""
        records, reply = self.cluster_control.broker_heartbeat(
            broker_id,
            broker_epoch,
            current_metadata_offset,
            want_fence=want_fence,
            want_shut_down=want_shut_down,
        )
        if any(isinstance(r.message, FenceBrokerRecord) for r in records):
            records += self.replication_control.leave_fenced_broker(broker_id)
        if any(isinstance(r.message, UnfenceBrokerRecord) for r in records):
            records += self.replication_control.lead_again_after_unfence(broker_id)
        return self._write(ControllerResult(records, reply))

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChangeRequest]
    ) -> ControllerResult[tuple[ErrorCode, list[IsrChangeResult]]]:
        """AlterPartition (api key 56, KIP-497) from a partition leader: STALE_BROKER_EPOCH for a broker
        that is not registered with that epoch, else per partition the checks of
        ReplicationControlManager.alter_partition; the answer carries each partition after the change."""
        error = self.cluster_control.check_broker_epoch(broker_id, broker_epoch)
        if error is not ErrorCode.NONE:
            return ControllerResult([], (error, []))
        outcomes: list[tuple[IsrChangeRequest, ErrorCode]] = []
        written: list[ApiMessageAndVersion] = []
        for change in changes:
            partition_error, records = self.replication_control.alter_partition(broker_id, change)
            written += self._write(ControllerResult(records, None)).records
            outcomes.append((change, partition_error))
        results = []
        for change, partition_error in outcomes:
            info = self.replication_control.topic(change.topic_id)
            part = info.partitions.get(change.partition_index) if info is not None else None
            if partition_error is not ErrorCode.NONE or part is None:
                results.append(IsrChangeResult(change.topic_id, change.partition_index, partition_error))
                continue
            results.append(
                IsrChangeResult(
                    change.topic_id,
                    change.partition_index,
                    ErrorCode.NONE,
                    part.leader,
                    part.leader_epoch,
                    part.isr,
                    part.partition_epoch,
                )
            )
        return ControllerResult(written, (ErrorCode.NONE, results))

    def elect_leaders(
        self, election_type: int, partitions: Sequence[tuple[str, int]] | None
    ) -> ControllerResult[list[ElectionResult]]:
        """ElectLeaders (api key 43, KIP-460): preferred or unclean leader election."""
        results, records = self.replication_control.elect_leaders(election_type, partitions)
        return self._write(ControllerResult(records, results))

    def alter_partition_reassignments(
        self, topics: Sequence[ReassignableTopic], allow_replication_factor_change: bool = True
    ) -> ControllerResult[list[ReassignmentTopicResult]]:
        """AlterPartitionReassignments (api key 45, KIP-455): start, complete or cancel reassignments."""
        return self._write(
            self.replication_control.alter_partition_reassignments(topics, allow_replication_factor_change)
        )

    def list_partition_reassignments(
        self, topics: Mapping[str, Sequence[int]] | None
    ) -> list[OngoingTopicReassignment]:
        """ListPartitionReassignments (api key 46, KIP-455): read-only."""
        return self.replication_control.list_partition_reassignments(topics)

    def unregister_broker(self, broker_id: int) -> ControllerResult[tuple[ErrorCode, str | None]]:
        """UnregisterBroker (api key 64): the UnregisterBrokerRecord that retires ``broker_id`` (Kafka
        QuorumController.unregisterBroker; BROKER_ID_NOT_REGISTERED for an unknown id). Refused while
        the broker is still a replica of any partition: unregistering it would leave those partitions
        a replica short for good, so the user moves them first (issue 30's decommission)."""
        registration = self.cluster_control.registration(broker_id)
        if registration is None:
            return ControllerResult(
                [],
                (ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"),
            )
        hosted = self.replication_control.partitions_on(broker_id)
        if hosted:
            shown = ", ".join(hosted[:5]) + (f" and {len(hosted) - 5} more" if len(hosted) > 5 else "")
            return ControllerResult(
                [],
                (
                    ErrorCode.INVALID_REQUEST,
                    f"Broker {broker_id} is still a replica of {shown}: reassign those partitions first",
                ),
            )
        record = UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=registration.broker_epoch)
        return self._write(ControllerResult([ApiMessageAndVersion.of(record)], (ErrorCode.NONE, None)))

    def balance_partition_leaders(self, imbalance_per_broker_percentage: int) -> ControllerResult[None]:
        """auto.leader.rebalance.enable: the periodic preferred-leader election (the shell's timer,
        leader.imbalance.check.interval.seconds)."""
        records = self.replication_control.balance_partition_leaders(imbalance_per_broker_percentage)
        return self._write(ControllerResult(records, None))

    def fence_brokers(self, broker_ids: Sequence[int]) -> ControllerResult[list[int]]:
        """Fence brokers whose heartbeat session expired (broker.session.timeout.ms); returns the ids
        actually fenced (registered and unfenced ones)."""
        fenced: list[int] = []
        written: list[ApiMessageAndVersion] = []
        for broker_id in broker_ids:
            records = self.cluster_control.fence(broker_id)
            if records:
                records += self.replication_control.leave_fenced_broker(broker_id)
                # Replayed broker by broker: the next broker's leader choice sees this one fenced.
                written += self._write(ControllerResult(records, None)).records
                fenced.append(broker_id)
        return ControllerResult(written, fenced)

    def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> ControllerResult[list[ScramAlterationResult]]:
        """AlterUserScramCredentials (51, KIP-554): per user, all of its alterations or none."""
        records, results = self.scram_control.alter(deletions, upsertions)
        return self._write(ControllerResult(records, results))

    def alter_configs(
        self, alterations: Sequence[ConfigAlteration], validate_only: bool = False
    ) -> ControllerResult[list[ConfigAlterationResult]]:
        """IncrementalAlterConfigs (44) and AlterConfigs (33) of topics, brokers and groups."""
        records, results = self.configuration_control.alter(
            alterations, lambda name: self.replication_control.topic_id(name) is not None, validate_only
        )
        return self._write(ControllerResult(records, results))

    def alter_client_quotas(
        self, alterations: Sequence[ClientQuotaAlteration], validate_only: bool = False
    ) -> ControllerResult[list[ClientQuotaAlterationResult]]:
        """AlterClientQuotas (49, KIP-546)."""
        records, results = self.client_quota_control.alter(alterations, validate_only)
        return self._write(ControllerResult(records, results))

    def update_features(
        self, updates: list[FeatureUpdate], validate_only: bool = False
    ) -> ControllerResult[FeatureUpdateError]:
        """UpdateFeatures (57, KIP-584/KIP-778), checked against every registered broker's ranges."""
        broker_features = {
            broker_id: {
                f.name: (f.min_supported_version, f.max_supported_version) for f in r.supported_features
            }
            for broker_id, r in self.cluster_control.registrations().items()
        }
        records, error = self.feature_control.update_features(updates, broker_features, validate_only)
        return self._write(ControllerResult(records, error))

    def create_acls(self, acls: Sequence[StandardAcl]) -> ControllerResult[list[AclCreationResult]]:
        """CreateAcls (30)."""
        records, results = self.acl_control.create(acls)
        return self._write(ControllerResult(records, results))

    def delete_acls(self, filters: Sequence[AclFilter]) -> ControllerResult[list[AclDeletionResult]]:
        """DeleteAcls (31)."""
        records, results = self.acl_control.delete(filters)
        return self._write(ControllerResult(records, results))

    def no_op(self) -> ControllerResult[None]:
        """KIP-835: the NoOpRecord an idle active controller writes so followers see a live leader."""
        return self._write(ControllerResult([ApiMessageAndVersion.of(NoOpRecord())], None))

    def broker_epoch(self, broker_id: int) -> int:
        """The registered broker's epoch, -1 when ``broker_id`` is not registered."""
        registration = self.cluster_control.registration(broker_id)
        return -1 if registration is None else registration.broker_epoch

    def _write(self, result: ControllerResult[T]) -> ControllerResult[T]:
        """Replay the generated records at the offsets they take when appended next (rule 2); not on an
        inactive controller, whose records are never appended."""
        if not self.active:
            return result
        for record in result.records:
            self.replay(record, self._next_write_offset)
        return result

    # --- replay ---------------------------------------------------------------------------------

    def replay(self, record: Any, offset: int) -> None:
        """Apply one metadata record read (or about to be written) at ``offset``."""
        assert offset >= self._next_write_offset, f"offset {offset} is behind {self._next_write_offset}"
        message = record.message if isinstance(record, ApiMessageAndVersion) else record
        self._dispatch(message, offset)
        self._next_write_offset = offset + 1

    def replay_snapshot(self, records: Sequence[Any], end_offset: int) -> None:
        """KIP-630: load a snapshot covering the log below ``end_offset`` into a fresh controller.
        Each record is replayed as if read at the snapshot's last contained offset (Kafka's
        QuorumController.handleLoadSnapshot); the next record read or written is ``end_offset``."""
        assert self._next_write_offset == 0 and self._transaction_start_offset == -1, "not a fresh controller"
        for record in records:
            message = record.message if isinstance(record, ApiMessageAndVersion) else record
            self._dispatch(message, end_offset - 1)
        self._next_write_offset = end_offset

    def load_image(self, image: MetadataImage, end_offset: int) -> None:
        """KIP-630: the state ``replay_snapshot`` builds from a snapshot of ``image``, taken straight from
        the loaded image (its registrations are immutable and shared) instead of replaying every record a
        second time. The next record read or written is ``end_offset``."""
        assert self._next_write_offset == 0 and self._transaction_start_offset == -1, "not a fresh controller"
        self.feature_control.restore(dict(image.features.finalized_versions))
        self.cluster_control.restore(dict(image.cluster.brokers), image.cluster_id)
        self.replication_control.restore(
            {
                topic_id: TopicControlInfo(topic.name, topic.topic_id, dict(topic.partitions))
                for topic_id, topic in image.topics.topics_by_id.items()
            }
        )
        self.configuration_control.restore(
            {resource: dict(values) for resource, values in image.configs.resources.items()}
        )
        self.scram_control.restore(dict(image.scram.credentials))
        self.acl_control.restore(dict(image.acls.acls))
        self.client_quota_control.restore(
            {entity: dict(values) for entity, values in image.client_quotas.entities.items()}
        )
        if image.producer_ids.next_producer_id >= 0:
            # What replaying the snapshot's one ProducerIdsRecord (BrokerId -1, BrokerEpoch -1) gives.
            self.producer_id_control.replay(
                ProducerIdsRecord(
                    broker_id=-1, broker_epoch=-1, next_producer_id=image.producer_ids.next_producer_id
                )
            )
        self._next_write_offset = end_offset

    def _dispatch(self, message: Any, offset: int) -> None:
        # The two types a long log is made of first, by identity (the match below tests each case in turn).
        kind = type(message)
        if kind is PartitionChangeRecord:
            self.replication_control.replay_partition_change(message)
            return
        if kind is PartitionRecord:
            self.replication_control.replay_partition(message)
            return
        cluster = self.cluster_control
        replication = self.replication_control
        match message:
            case FeatureLevelRecord():
                self.feature_control.replay(message)
            case ClusterIdRecord():
                cluster.replay_cluster_id(message)
            case RegisterBrokerRecord():
                cluster.replay_register_broker(message)
            case UnregisterBrokerRecord():
                cluster.replay_unregister_broker(message)
            case FenceBrokerRecord():
                cluster.replay_registration_change(message.id, message.epoch, FENCING_CHANGE_FENCE)
            case UnfenceBrokerRecord():
                cluster.replay_registration_change(message.id, message.epoch, FENCING_CHANGE_UNFENCE)
            case BrokerRegistrationChangeRecord():
                cluster.replay_registration_change(
                    message.broker_id,
                    message.broker_epoch,
                    message.fenced,
                    message.in_controlled_shutdown,
                    message.log_dirs,
                )
            case TopicRecord():
                replication.replay_topic(message)
            case PartitionRecord():
                replication.replay_partition(message)
            case PartitionChangeRecord():
                replication.replay_partition_change(message)
            case RemoveTopicRecord():
                replication.replay_remove_topic(message)
            case ConfigRecord():
                self.configuration_control.replay(message)
            case ProducerIdsRecord():
                self.producer_id_control.replay(message)
            case UserScramCredentialRecord() | RemoveUserScramCredentialRecord():
                self.scram_control.replay(message)
            case AccessControlEntryRecord() | RemoveAccessControlEntryRecord():
                self.acl_control.replay(message)
            case ClientQuotaRecord():
                self.client_quota_control.replay(message)
            case BeginTransactionRecord():
                if self._transaction_start_offset != -1:
                    raise MetadataReplayError(
                        f"BeginTransactionRecord at {offset} inside the transaction from {self._transaction_start_offset}"
                    )
                self._pre_transaction_state = self.state()
                self._transaction_start_offset = offset
            case EndTransactionRecord() | AbortTransactionRecord():
                if self._transaction_start_offset == -1:
                    raise MetadataReplayError(
                        f"Can't replay {type(message).__name__} at {offset} because there is no open transaction."
                    )
                if isinstance(message, AbortTransactionRecord):
                    # Kafka OffsetControlManager: an abort reverts to the state before the transaction.
                    assert self._pre_transaction_state is not None
                    self._restore(self._pre_transaction_state)
                self._transaction_start_offset = -1
                self._pre_transaction_state = None
            case NoOpRecord():
                pass
            case _:
                raise MetadataReplayError(f"no controller replay for {type(message).__name__}")

    # --- inspection -----------------------------------------------------------------------------

    def _restore(self, state: ControllerState) -> None:
        """Put every manager back to ``state`` (only for AbortTransactionRecord; offsets move on)."""
        self.feature_control.restore(state.finalized_versions)
        self.cluster_control.restore(state.brokers, state.cluster_id)
        self.replication_control.restore(state.topics)
        self.configuration_control.restore(state.configs)
        self.producer_id_control.restore(state.next_producer_block, state.producer_ids_broker_epoch)
        self.scram_control.restore(state.scram_credentials)
        self.acl_control.restore(state.acls)
        self.client_quota_control.restore(state.client_quotas)

    def state(self) -> ControllerState:
        return ControllerState(
            next_write_offset=self._next_write_offset,
            transaction_start_offset=self._transaction_start_offset,
            finalized_versions=self.feature_control.finalized_versions(),
            cluster_id=self.cluster_control.cluster_id,
            brokers=self.cluster_control.registrations(),
            topics=self.replication_control.topics(),
            configs=self.configuration_control.configs(),
            next_producer_block=self.producer_id_control.next_producer_block,
            producer_ids_broker_epoch=self.producer_id_control.broker_epoch,
            scram_credentials=self.scram_control.credentials(),
            acls=self.acl_control.acls(),
            client_quotas=self.client_quota_control.quotas(),
        )
