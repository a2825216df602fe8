"""ReplicationControlManager: topics and partitions (create, delete), replay-driven.

Rules (Kafka ``ReplicationControlManager.java``, ``Topic.java``):

1. Topic names: non-empty, not "." or "..", at most 249 characters of ``[a-zA-Z0-9._-]``; a name that
   differs from an existing one only by '.' vs '_' collides (INVALID_TOPIC_EXCEPTION, 17). An existing
   name is TOPIC_ALREADY_EXISTS (36). A name given twice in one request is INVALID_REQUEST (42).
2. ``num_partitions`` -1 means ``num.partitions`` (the default); 0 or below -1 is INVALID_PARTITIONS
   (37). ``replication_factor`` -1 means ``default.replication.factor``; 0 or below -1, or more than
   the usable (registered, unfenced, not shutting down) brokers, is INVALID_REPLICATION_FACTOR (38).
3. A manual assignment needs both numbers at -1 (else INVALID_REQUEST); its partitions must be 0..n-1,
   each listing distinct registered brokers, all of one size, with at least one usable broker
   (else INVALID_REPLICA_ASSIGNMENT, 39).
4. A new topic is one TopicRecord, then its ConfigRecords, then one PartitionRecord per partition with
   leader = first usable replica, ISR = usable replicas, leader_epoch 0, partition_epoch 0. Topic ids
   and the placement offset come from the injected ``random.Random``.
5. ``validate_only`` computes the same answers and returns no records.
6. Delete: unknown names are UNKNOWN_TOPIC_OR_PARTITION (3), unknown ids UNKNOWN_TOPIC_ID (100); each
   topic gets one RemoveTopicRecord even if named twice (by name and by id).
7. Replay is the only mutation; a record inconsistent with the state raises ``MetadataReplayError``.
8. CreatePartitions (37, KIP-195; Kafka ``createPartitions``): an unknown topic is
   UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one is INVALID_PARTITIONS; assignments, when
   given, are one broker list per new partition (else INVALID_REPLICA_ASSIGNMENT) checked as rule 3 with
   the size of partition 0's replicas. New partitions take ids from the current count, are placed as in
   rule 4 with partition 0's replication factor, and are one PartitionRecord each. A name given twice
   is INVALID_REQUEST (Kafka's ControllerApis).
9. One CreateTopics or CreatePartitions may add at most MAX_PARTITIONS_PER_BATCH partitions in all;
   beyond that every topic of it is POLICY_VIOLATION (44) and nothing is written.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from pykraft.controller.cluster import ClusterControlManager
from pykraft.controller.configs import ConfigurationControlManager
from pykraft.controller.features import FeatureControlManager
from pykraft.controller.partition_change import (
    ReassignmentReplicas,
    ReassignmentRevert,
    build_partition_change,
    is_reassigning,
)
from pykraft.controller.replica_placer import place_replicas
from pykraft.controller.result import ControllerResult
from pykraft.core.errors import ErrorCode
from pykraft.core.topic_configs import check_topic_configs
from pykraft.core.uuid import ZERO_UUID, random_uuid
from pykraft.metadata.image import (
    CONFIG_RESOURCE_TYPE_TOPIC,
    NO_LEADER,
    NO_LEADER_CHANGE,
    ConfigResource,
    PartitionRegistration,
)
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    MetadataReplayError,
    PartitionChangeRecord,
    RemoveTopicRecord,
    TopicRecord,
    uuid_or_zero,
)

# Kafka Topic.MAX_NAME_LENGTH and LEGAL_CHARS.
TOPIC_NAME_LENGTH_MAX: Final = 249
_TOPIC_LEGAL_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
# Kafka ReplicationControlManager.MAX_PARTITIONS_PER_BATCH (rule 9): one request cannot make the controller
# write more partitions than this at once (Kafka bounds a user operation's records alike).
MAX_PARTITIONS_PER_BATCH: Final = 10_000
# Kafka ReplicationControlManager's maxElectionsPerImbalance: leader balance changes at most this many
# partitions per pass (the next pass does the rest).
MAX_ELECTIONS_PER_IMBALANCE: Final = 1_000


@dataclass(frozen=True, slots=True)
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """One topic of a CreateTopics request (Kafka CreatableTopic)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    # Kafka's list of (PartitionIndex, BrokerIds), or a mapping partition index -> broker ids.
    assignments: Sequence[CreatableReplicaAssignment] | Mapping[int, Sequence[int]] = ()
    configs: Mapping[str, str | None] = field(default_factory=dict)

    def assignment_list(self) -> list[CreatableReplicaAssignment]:
        if isinstance(self.assignments, Mapping):
            return [CreatableReplicaAssignment(p, tuple(b)) for p, b in self.assignments.items()]
        return list(self.assignments)


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str | None
    topic_id: uuid.UUID
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    """One topic of a CreatePartitions request (Kafka CreatePartitionsTopic): the new partition count and,
    optionally, one broker list per partition to add (None: the controller places them)."""

    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(slots=True)
class TopicControlInfo:
    """The controller's mutable view of one topic (changed only by replay)."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IsrChangeRequest:
    """One partition of an AlterPartition request (AlterPartitionRequest.PartitionData, v2)."""

    topic_id: uuid.UUID
    partition_index: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IsrChangeResult:
    """One partition of an AlterPartition response: the partition as it stands after the change."""

    topic_id: uuid.UUID
    partition_index: int
    error_code: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ReassignableTopic:
    """One topic of an AlterPartitionReassignments request: (partition index, target replicas or None
    to cancel) per partition."""

    name: str
    partitions: Sequence[tuple[int, Sequence[int] | None]]


@dataclass(frozen=True, slots=True)
class ReassignmentPartitionResult:
    partition_index: int
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignmentTopicResult:
    name: str
    partitions: list[ReassignmentPartitionResult]


@dataclass(frozen=True, slots=True)
class OngoingPartitionReassignment:
    partition_index: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OngoingTopicReassignment:
    name: str
    partitions: list[OngoingPartitionReassignment]


# ElectLeadersRequest.ElectionType (KIP-460).
ELECTION_TYPE_PREFERRED: Final = 0
ELECTION_TYPE_UNCLEAN: Final = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    topic: str
    partition_index: int
    error_code: ErrorCode


class _TopicError(Exception):
    def __init__(self, error_code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka Topic.validate), or None."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        return (
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length "
            f"{TOPIC_NAME_LENGTH_MAX}"
        )
    if not set(name) <= _TOPIC_LEGAL_CHARS:
        return (
            f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    return None


def unify_collision_chars(name: str) -> str:
    """Kafka Topic.unifyCollisionChars: '.' and '_' collide in metric names."""
    return name.replace(".", "_")


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_NamedTopic = TypeVar("_NamedTopic", bound=_Named)


def _first_of_each_name(topics: Sequence[_NamedTopic]) -> list[tuple[_NamedTopic, bool]]:
    """Each topic name once, where it first appears, with whether the request names it more than once:
    Kafka answers a name given twice once, with INVALID_REQUEST (ControllerApis)."""
    counts = Counter(topic.name for topic in topics)
    seen: set[str] = set()
    unique: list[tuple[_NamedTopic, bool]] = []
    for topic in topics:
        if topic.name not in seen:
            seen.add(topic.name)
            unique.append((topic, counts[topic.name] > 1))
    return unique


def _partitions_per_batch_error(total: int) -> _TopicError | None:
    """Rule 9 (Kafka ReplicationControlManager.validateTotalNumberOfPartitions)."""
    if total <= MAX_PARTITIONS_PER_BATCH:
        return None
    return _TopicError(ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")


class ReplicationControlManager:
    def __init__(
        self,
        *,
        feature_control: FeatureControlManager,
        cluster_control: ClusterControlManager,
        configuration_control: ConfigurationControlManager,
        rng: random.Random,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        unclean_leader_election_enable: bool = False,
    ) -> None:
        assert default_num_partitions > 0
        assert default_replication_factor > 0
        # unclean.leader.election.enable: a partition whose whole ISR is gone may elect any live replica
        # (losing what only the ISR had) rather than stay offline.
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self._feature_control = feature_control
        self._cluster_control = cluster_control
        self._configuration_control = configuration_control
        self._rng = rng
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self._topics: dict[uuid.UUID, TopicControlInfo] = {}
        self._topics_by_name: dict[str, uuid.UUID] = {}
        self._topics_by_unified_name: dict[str, set[str]] = {}

    # --- reads ----------------------------------------------------------------------------------

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self._topics_by_name.get(name)

    def topic(self, topic_id: uuid.UUID) -> TopicControlInfo | None:
        return self._topics.get(topic_id)

    def topics(self) -> dict[uuid.UUID, TopicControlInfo]:
        return {
            topic_id: TopicControlInfo(info.name, info.topic_id, dict(info.partitions))
            for topic_id, info in self._topics.items()
        }

    # --- generate: create -----------------------------------------------------------------------

    def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> ControllerResult[list[CreatableTopicResult]]:
        records: list[ApiMessageAndVersion] = []
        results: list[CreatableTopicResult] = []
        unique = _first_of_each_name(topics)
        too_many = _partitions_per_batch_error(
            sum(self._requested_partitions(topic) for topic, duplicated in unique if not duplicated)
        )
        # Names created earlier in this request, unified, so two new topics cannot collide either.
        new_unified: dict[str, str] = {}
        new_topic_ids: set[uuid.UUID] = set()
        for topic, duplicated in unique:
            try:
                if duplicated:
                    raise _TopicError(ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic.")
                if too_many is not None:
                    raise too_many
                self._validate_new_topic(topic, new_unified)
                result, topic_records = self._create_topic(topic, new_topic_ids)
            except _TopicError as error:
                results.append(CreatableTopicResult(topic.name, error.error_code, error.message))
                continue
            new_unified[unify_collision_chars(topic.name)] = topic.name
            new_topic_ids.add(result.topic_id)
            results.append(result)
            records.extend(topic_records)
        return ControllerResult([] if validate_only else records, results)

    def _requested_partitions(self, topic: CreatableTopic) -> int:
        """How many partitions ``topic`` asks for, as Kafka counts them for rule 9 (invalid counts are 0)."""
        if topic.assignments:
            return len(topic.assignment_list())
        if topic.num_partitions == -1:
            return self.default_num_partitions
        return max(topic.num_partitions, 0)

    def _validate_new_topic(self, topic: CreatableTopic, new_unified: Mapping[str, str]) -> None:
        reason = topic_name_error(topic.name)
        if reason is not None:
            raise _TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if topic.name in self._topics_by_name:
            raise _TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
        unified = unify_collision_chars(topic.name)
        colliding = sorted(self._topics_by_unified_name.get(unified, set()))
        if unified in new_unified:
            colliding.append(new_unified[unified])
        if colliding:
            raise _TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{topic.name}' collides with existing topic: {colliding[0]}",
            )
        null_configs = sorted(key for key, value in topic.configs.items() if value is None)
        if null_configs:
            raise _TopicError(
                ErrorCode.INVALID_CONFIG,
                "Null value not supported for topic configs: " + ",".join(null_configs),
            )
        problem = check_topic_configs(topic.configs)
        if problem is not None:
            # Kafka's ConfigurationControlManager.validateAlterConfig: unknown names and bad values.
            raise _TopicError(ErrorCode.INVALID_CONFIG, problem)

    def _create_topic(
        self, topic: CreatableTopic, new_topic_ids: set[uuid.UUID]
    ) -> tuple[CreatableTopicResult, list[ApiMessageAndVersion]]:
        if topic.assignments:
            partitions = self._manual_partitions(topic)
        else:
            partitions = self._placed_partitions(topic)
        topic_id = random_uuid(self._rng)
        while topic_id in self._topics or topic_id in new_topic_ids:
            topic_id = random_uuid(self._rng)
        records = [ApiMessageAndVersion.of(TopicRecord(name=topic.name, topic_id=topic_id))]
        # Kafka: ConfigRecords go after the TopicRecord and before the PartitionRecords.
        configs = {key: value for key, value in topic.configs.items() if value is not None}
        records.extend(self._configuration_control.generate_topic_config_records(topic.name, configs))
        records.extend(self._partition_records(topic_id, partitions))
        result = CreatableTopicResult(
            name=topic.name,
            error_code=ErrorCode.NONE,
            topic_id=topic_id,
            num_partitions=len(partitions),
            replication_factor=len(partitions[0].replicas),
        )
        return result, records

    def _placed_partitions(self, topic: CreatableTopic) -> dict[int, PartitionRegistration]:
        if topic.replication_factor == 0 or topic.replication_factor < -1:
            raise _TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if topic.num_partitions == 0 or topic.num_partitions < -1:
            raise _TopicError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        num_partitions = self.default_num_partitions if topic.num_partitions == -1 else topic.num_partitions
        replication_factor = (
            self.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
        )
        return self._place(0, num_partitions, replication_factor)

    def _place(
        self, first_partition_id: int, count: int, replication_factor: int
    ) -> dict[int, PartitionRegistration]:
        """The replica placer of CreateTopics and CreatePartitions (Kafka's ReplicaPlacer.place with a
        PlacementSpec(startPartition, numPartitions, numReplicas)): partitions ``first_partition_id`` on,
        each on ``replication_factor`` usable brokers."""
        usable = self._cluster_control.usable_broker_ids()
        if replication_factor > len(usable):
            raise _TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
                f"of {replication_factor} cannot be reached because only {len(usable)} broker(s) are registered "
                "and unfenced.",
            )
        # Round-robin from a random start spreads leaders; the rng keeps it replayable in simulation.
        # Brokers with a broker.rack spread each partition over racks (KIP-36, controller/replica_placer).
        start = self._rng.randrange(len(usable))
        racks = {b: reg.rack for b in usable if (reg := self._cluster_control.registration(b)) is not None}
        placed = place_replicas(
            usable, racks, start, range(first_partition_id, first_partition_id + count), replication_factor
        )
        return {partition_id: self._new_partition(replicas) for partition_id, replicas in placed.items()}

    def _manual_partitions(self, topic: CreatableTopic) -> dict[int, PartitionRegistration]:
        if topic.replication_factor != -1:
            raise _TopicError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if topic.num_partitions != -1:
            raise _TopicError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        partitions: dict[int, PartitionRegistration] = {}
        replica_count: int | None = None
        for assignment in topic.assignment_list():
            if assignment.partition_index in partitions:
                raise _TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {assignment.partition_index}",
                )
            partitions[assignment.partition_index] = self._manual_partition(
                assignment.partition_index, assignment.broker_ids, replica_count
            )
            replica_count = len(assignment.broker_ids)
        if sorted(partitions) != list(range(len(partitions))):
            raise _TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "partitions should be a consecutive 0-based integer sequence",
            )
        return partitions

    def _manual_partition(
        self, partition_id: int, broker_ids: Sequence[int], replica_count: int | None
    ) -> PartitionRegistration:
        """One partition of a manual assignment (CreateTopics or CreatePartitions): checked as Kafka's
        validateManualPartitionAssignment, then at least one of its brokers must be usable."""
        self._validate_manual_replicas(broker_ids, replica_count)
        if not any(self._cluster_control.is_active(b) for b in broker_ids):
            raise _TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition "
                f"{partition_id} are fenced or in controlled shutdown.",
            )
        return self._new_partition(broker_ids)

    def _validate_manual_replicas(self, broker_ids: Sequence[int], replica_count: int | None) -> None:
        if not broker_ids:
            raise _TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            )
        # Kafka walks the ids sorted, so which error a list gets does not depend on its order.
        previous: int | None = None
        for broker_id in sorted(broker_ids):
            if broker_id == previous:
                raise _TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker_id} more than once.",
                )
            previous = broker_id
            if self._cluster_control.registration(broker_id) is None:
                raise _TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
                )
        if replica_count is not None and replica_count != len(broker_ids):
            raise _TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but this "
                f"is not consistent with previous partitions, which have {replica_count} replica(s).",
            )

    def _new_partition(self, replicas: Sequence[int]) -> PartitionRegistration:
        isr = tuple(b for b in replicas if self._cluster_control.is_active(b))
        assert isr, "callers checked that a usable replica exists"
        return PartitionRegistration(
            replicas=tuple(replicas),
            isr=isr,
            leader=isr[0],
            leader_epoch=0,
            partition_epoch=0,
            directories=tuple(self._cluster_control.default_directory(b) for b in replicas),
        )

    def _partition_records(
        self, topic_id: uuid.UUID, partitions: Mapping[int, PartitionRegistration]
    ) -> list[ApiMessageAndVersion]:
        metadata_version = self._feature_control.metadata_version
        return [partitions[p].to_record(topic_id, p, metadata_version) for p in sorted(partitions)]

    # --- generate: create partitions ------------------------------------------------------------

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], validate_only: bool = False
    ) -> ControllerResult[list[CreatePartitionsTopicResult]]:
        """CreatePartitions (rule 8): Kafka's ReplicationControlManager.createPartitions, topic by topic,
        with ControllerApis' duplicate check. Generates only; replaying the PartitionRecords adds the
        partitions."""
        records: list[ApiMessageAndVersion] = []
        results: list[CreatePartitionsTopicResult] = []
        unique = _first_of_each_name(topics)
        too_many = _partitions_per_batch_error(
            sum(self._partitions_to_add(topic) for topic, duplicated in unique if not duplicated)
        )
        for topic, duplicated in unique:
            try:
                if duplicated:
                    raise _TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                if too_many is not None:
                    raise too_many
                records.extend(self._grow_topic(topic))
            except _TopicError as error:
                results.append(CreatePartitionsTopicResult(topic.name, error.error_code, error.message))
                continue
            results.append(CreatePartitionsTopicResult(topic.name, ErrorCode.NONE))
        return ControllerResult([] if validate_only else records, results)

    def _partitions_to_add(self, topic: CreatePartitionsTopic) -> int:
        topic_id = self._topics_by_name.get(topic.name)
        if topic_id is None:
            return 0
        return max(topic.count - len(self._topics[topic_id].partitions), 0)

    def _grow_topic(self, topic: CreatePartitionsTopic) -> list[ApiMessageAndVersion]:
        """Kafka ReplicationControlManager.createPartitionsForTopic: the new partitions' records."""
        topic_id = self._topics_by_name.get(topic.name)
        if topic_id is None:
            raise _TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)  # Kafka sends no message
        info = self._topics[topic_id]
        current = len(info.partitions)
        if topic.count == current:
            raise _TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if topic.count < current:
            raise _TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {topic.name} currently has {current} partition(s); {topic.count} would not be "
                "an increase.",
            )
        additional = topic.count - current
        if topic.assignments is not None and len(topic.assignments) != additional:
            raise _TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
                "assignment(s) were specified.",
            )
        if not info.partitions:
            raise _TopicError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Invalid state: topic {topic.name} appears to have no partitions.",
            )
        # Kafka takes the replication factor from the topic's first partition.
        replication_factor = len(info.partitions[min(info.partitions)].replicas)
        # A topic's partitions are always 0..current-1 (createTopics checks manual ones), so the new ones
        # continue from the count.
        if topic.assignments is None:
            partitions = self._place(current, additional, replication_factor)
        else:
            partitions = {
                current + i: self._manual_partition(current + i, broker_ids, replication_factor)
                for i, broker_ids in enumerate(topic.assignments)
            }
        return self._partition_records(topic_id, partitions)

    # --- generate: delete -----------------------------------------------------------------------

    def delete_topics(
        self, *, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = ()
    ) -> ControllerResult[list[DeletableTopicResult]]:
        results: list[DeletableTopicResult] = []
        to_remove: list[uuid.UUID] = []
        for name in dict.fromkeys(names):
            found = self._topics_by_name.get(name)
            if names.count(name) > 1:
                results.append(
                    DeletableTopicResult(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                )
            elif found is None:
                results.append(DeletableTopicResult(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                results.append(DeletableTopicResult(name, found, ErrorCode.NONE))
                to_remove.append(found)
        for topic_id in dict.fromkeys(topic_ids):
            info = self._topics.get(topic_id)
            if topic_ids.count(topic_id) > 1:
                results.append(
                    DeletableTopicResult(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
                )
            elif topic_id == ZERO_UUID:
                results.append(
                    DeletableTopicResult(None, topic_id, ErrorCode.INVALID_REQUEST, "Invalid topic id.")
                )
            elif info is None:
                results.append(DeletableTopicResult(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            else:
                results.append(DeletableTopicResult(info.name, topic_id, ErrorCode.NONE))
                to_remove.append(topic_id)
        records = [ApiMessageAndVersion.of(RemoveTopicRecord(topic_id=t)) for t in dict.fromkeys(to_remove)]
        return ControllerResult(records, results)

    def restore(self, topics: dict[uuid.UUID, TopicControlInfo]) -> None:
        """Set the saved state (AbortTransactionRecord, and QuorumController.load_image)."""
        self._topics = {
            t: TopicControlInfo(i.name, i.topic_id, dict(i.partitions)) for t, i in topics.items()
        }
        self._topics_by_name = {info.name: topic_id for topic_id, info in self._topics.items()}
        self._topics_by_unified_name = {}
        for name in self._topics_by_name:
            self._topics_by_unified_name.setdefault(unify_collision_chars(name), set()).add(name)

    # --- replay ---------------------------------------------------------------------------------

    def replay_topic(self, record: Any) -> None:
        topic_id = uuid_or_zero(record.topic_id)
        existing = self._topics_by_name.get(record.name)
        if existing is not None:
            raise MetadataReplayError(f"Found duplicate TopicRecord for {record.name} (topic id {existing})")
        if topic_id in self._topics:
            raise MetadataReplayError(f"Found duplicate topic id {topic_id} for {record.name}")
        self._topics_by_name[record.name] = topic_id
        self._topics_by_unified_name.setdefault(unify_collision_chars(record.name), set()).add(record.name)
        self._topics[topic_id] = TopicControlInfo(record.name, topic_id)

    def replay_partition(self, record: Any) -> None:
        info = self._topic_or_raise(uuid_or_zero(record.topic_id), "create partition")
        info.partitions[record.partition_id] = PartitionRegistration.from_record(record)

    def leave_fenced_broker(self, broker_id: int) -> list[ApiMessageAndVersion]:
        """Kafka ReplicationControlManager.handleBrokerFenced: ``broker_id`` leaves every ISR and its
        partitions get another usable ISR member as leader, or none (-1) when no other is left; the
        ISR keeps its last member (Kafka without ELR), so the partition stays offline until it
        returns. One PartitionChangeRecord per partition that changes, fields unchanged left null."""
        usable = set(self._cluster_control.usable_broker_ids()) - {broker_id}
        records: list[ApiMessageAndVersion] = []
        for info in sorted(self._topics.values(), key=lambda t: t.name):
            for partition_id, part in sorted(info.partitions.items()):
                if broker_id not in part.isr and part.leader != broker_id:
                    continue
                isr = [r for r in part.isr if r != broker_id] or list(part.isr)
                leader = part.leader
                if leader == broker_id or leader not in usable:
                    leader = next((r for r in part.replicas if r in isr and r in usable), NO_LEADER)
                    if leader == NO_LEADER and self.unclean_leader_election_enable:
                        leader = next((r for r in part.replicas if r in usable), NO_LEADER)
                        if leader != NO_LEADER:
                            isr = [leader]
                new_isr = None if tuple(isr) == part.isr else isr
                new_leader = NO_LEADER_CHANGE if leader == part.leader else leader
                if new_isr is None and new_leader == NO_LEADER_CHANGE:
                    continue
                change = PartitionChangeRecord(
                    partition_id=partition_id, topic_id=info.topic_id, isr=new_isr, leader=new_leader
                )
                records.append(ApiMessageAndVersion.of(change))
        return records

    def alter_partition(
        self, broker_id: int, change: IsrChangeRequest
    ) -> tuple[ErrorCode, list[ApiMessageAndVersion]]:
        """One partition of an AlterPartition (KIP-497) from its leader: checked as Kafka's
        ReplicationControlManager.alterPartition does, then the PartitionChangeRecord that sets the new
        ISR (none when the ISR is unchanged). Generates only; replay makes the change."""
        info = self._topics.get(change.topic_id)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, []
        part = info.partitions.get(change.partition_index)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        if part.leader != broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, []
        if change.leader_epoch < part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, []
        if change.leader_epoch > part.leader_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, []
        if change.partition_epoch != part.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION, []
        new_isr = tuple(change.new_isr)
        if (
            broker_id not in new_isr
            or len(set(new_isr)) != len(new_isr)
            or not set(new_isr) <= set(part.replicas)
        ):
            return ErrorCode.INVALID_REQUEST, []
        # A replica may join only while it is registered, unfenced and not shutting down (KIP-841).
        if any(r not in part.isr and not self._cluster_control.is_active(r) for r in new_isr):
            return ErrorCode.INELIGIBLE_REPLICA, []
        if set(new_isr) == set(part.isr):
            return ErrorCode.NONE, []
        ordered = [r for r in part.replicas if r in new_isr]
        # Through Kafka's PartitionChangeBuilder: the ISR that takes in the last adding replica
        # completes a reassignment (partition_change rule 2).
        record = build_partition_change(
            info.topic_id, change.partition_index, part, self._cluster_control.is_active, target_isr=ordered
        )
        if record is None:
            return ErrorCode.NONE, []
        if record.leader not in (NO_LEADER_CHANGE, broker_id):
            # Kafka: completing the reassignment moved leadership off the requesting leader; it learns the
            # new state from the metadata (NEW_LEADER_ELECTED), the change is written all the same.
            return ErrorCode.NEW_LEADER_ELECTED, [ApiMessageAndVersion.of(record)]
        return ErrorCode.NONE, [ApiMessageAndVersion.of(record)]

    # --- generate: reassignments (KIP-455) --------------------------------------------------------

    def alter_partition_reassignments(
        self, topics: Sequence[ReassignableTopic], allow_replication_factor_change: bool = True
    ) -> ControllerResult[list[ReassignmentTopicResult]]:
        """AlterPartitionReassignments (45): Kafka ReplicationControlManager.alterPartitionReassignments,
        partition by partition (one failing does not stop the others). ``replicas`` None cancels."""
        records: list[ApiMessageAndVersion] = []
        results: list[ReassignmentTopicResult] = []
        for topic in topics:
            partition_results: list[ReassignmentPartitionResult] = []
            for partition_index, replicas in topic.partitions:
                try:
                    record = self._alter_partition_reassignment(
                        topic.name, partition_index, replicas, allow_replication_factor_change
                    )
                except _TopicError as error:
                    partition_results.append(
                        ReassignmentPartitionResult(partition_index, error.error_code, error.message)
                    )
                    continue
                if record is not None:
                    records.append(ApiMessageAndVersion.of(record))
                partition_results.append(ReassignmentPartitionResult(partition_index, ErrorCode.NONE))
            results.append(ReassignmentTopicResult(topic.name, partition_results))
        return ControllerResult(records, results)

    def _alter_partition_reassignment(
        self, name: str, partition_index: int, replicas: Sequence[int] | None, allow_rf_change: bool
    ) -> PartitionChangeRecord | None:
        topic_id = self._topics_by_name.get(name)
        if topic_id is None:
            raise _TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
        part = self._topics[topic_id].partitions.get(partition_index)
        if part is None:
            raise _TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{partition_index}."
            )
        is_active = self._cluster_control.is_active
        if replicas is None:
            if not is_reassigning(part):
                raise _TopicError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
                )
            revert = ReassignmentRevert.of(part)
            if revert.unclean and not self._unclean_election_enabled(name):
                raise _TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {name}:{partition_index} because it would "
                    "require an unclean leader election.",
                )
            return build_partition_change(
                topic_id,
                partition_index,
                part,
                is_active,
                target_replicas=revert.replicas,
                target_isr=revert.isr,
                target_adding=(),
                target_removing=(),
            )
        self._validate_manual_replicas(replicas, None)
        if not allow_rf_change:
            # KIP-860: the replication factor the partition has, or is being reassigned to.
            current_rf = len(part.replicas) - len(part.removing_replicas)
            if current_rf != len(replicas):
                raise _TopicError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {current_rf} to {len(replicas)} but "
                    "AllowReplicationFactorChange is false",
                )
        target = ReassignmentReplicas.of(part.replicas, replicas)
        return build_partition_change(
            topic_id,
            partition_index,
            part,
            is_active,
            target_replicas=target.replicas,
            target_adding=target.adding,
            target_removing=target.removing,
        )

    def _unclean_election_enabled(self, name: str) -> bool:
        configs = self._configuration_control.configs_for(ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, name))
        value = configs.get("unclean.leader.election.enable")
        return self.unclean_leader_election_enable if value is None else value.lower() == "true"

    def list_partition_reassignments(
        self, topics: Mapping[str, Sequence[int]] | None
    ) -> list[OngoingTopicReassignment]:
        """ListPartitionReassignments (46): the partitions being reassigned, of every topic (``topics``
        None) or of the named partitions; unknown names and partitions are left out, as Kafka does."""
        wanted: dict[str, Sequence[int]]
        if topics is None:
            wanted = {
                info.name: sorted(info.partitions)
                for info in sorted(self._topics.values(), key=lambda t: t.name)
            }
        else:
            wanted = dict(topics)
        found: list[OngoingTopicReassignment] = []
        for name, indexes in wanted.items():
            topic_id = self._topics_by_name.get(name)
            if topic_id is None:
                continue
            partitions = self._topics[topic_id].partitions
            ongoing = [
                OngoingPartitionReassignment(
                    index, part.replicas, part.adding_replicas, part.removing_replicas
                )
                for index in indexes
                if (part := partitions.get(index)) is not None and is_reassigning(part)
            ]
            if ongoing:
                found.append(OngoingTopicReassignment(name, ongoing))
        return found

    def elect_leaders(
        self, election_type: int, partitions: Sequence[tuple[str, int]] | None
    ) -> tuple[list[ElectionResult], list[ApiMessageAndVersion]]:
        """ElectLeaders (43, KIP-460): type 0 moves leadership to the preferred replica (the first one)
        when it is in the ISR and active; type 1 (unclean) gives a leaderless partition any active
        replica when no ISR member is. ``partitions`` None means every partition; then, as Kafka's
        ReplicationControlManager.electLeaders does, partitions that already have the desired leader
        (ELECTION_NOT_NEEDED) are left out of the answer."""
        every_partition = partitions is None
        if partitions is None:
            partitions = [
                (info.name, index)
                for info in sorted(self._topics.values(), key=lambda t: t.name)
                for index in sorted(info.partitions)
            ]
        usable = set(self._cluster_control.usable_broker_ids())
        results: list[ElectionResult] = []
        records: list[ApiMessageAndVersion] = []
        for name, index in partitions:
            topic_id = self._topics_by_name.get(name)
            part = self._topics[topic_id].partitions.get(index) if topic_id is not None else None
            if topic_id is None or part is None:
                results.append(ElectionResult(name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            leader, isr = NO_LEADER, None
            if election_type == ELECTION_TYPE_PREFERRED:
                preferred = part.replicas[0]
                if part.leader == preferred:
                    results.append(ElectionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED))
                    continue
                if preferred in part.isr and preferred in usable:
                    leader = preferred
            else:
                if part.leader != NO_LEADER and part.leader in usable:
                    results.append(ElectionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED))
                    continue
                leader = next((r for r in part.replicas if r in part.isr and r in usable), NO_LEADER)
                if leader == NO_LEADER:
                    leader = next((r for r in part.replicas if r in usable), NO_LEADER)
                    isr = [leader]
            if leader == NO_LEADER:
                error = (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                    if election_type == ELECTION_TYPE_PREFERRED
                    else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                )
                results.append(ElectionResult(name, index, error))
                continue
            change = PartitionChangeRecord(partition_id=index, topic_id=topic_id, leader=leader, isr=isr)
            records.append(ApiMessageAndVersion.of(change))
            results.append(ElectionResult(name, index, ErrorCode.NONE))
        if every_partition:
            results = [r for r in results if r.error_code != ErrorCode.ELECTION_NOT_NEEDED]
        return results, records

    def partitions_on(self, broker_id: int) -> list[str]:
        """``topic-partition`` of every partition with ``broker_id`` among its replicas."""
        return [
            f"{info.name}-{partition_id}"
            for info in sorted(self._topics.values(), key=lambda t: t.name)
            for partition_id, part in sorted(info.partitions.items())
            if broker_id in part.replicas
        ]

    def balance_partition_leaders(self, imbalance_per_broker_percentage: int) -> list[ApiMessageAndVersion]:
        """auto.leader.rebalance.enable: leadership goes back to each partition's preferred replica (the
        first) when it is an active ISR member. As Kafka's leader balance decides which brokers to act
        for (KafkaController.checkAndTriggerAutoLeaderRebalance; KRaft's maybeBalancePartitionLeaders
        elects alike): a preferred broker's partitions move only when more than
        ``imbalance_per_broker_percentage`` % of those it is preferred for are led elsewhere; partitions
        being reassigned are left alone. At most MAX_ELECTIONS_PER_IMBALANCE changes per call."""
        by_preferred: dict[int, list[tuple[TopicControlInfo, int, PartitionRegistration]]] = {}
        for info in sorted(self._topics.values(), key=lambda t: t.name):
            for partition_id, part in sorted(info.partitions.items()):
                if not is_reassigning(part):
                    by_preferred.setdefault(part.replicas[0], []).append((info, partition_id, part))
        records: list[ApiMessageAndVersion] = []
        for preferred, partitions in sorted(by_preferred.items()):
            elsewhere = [entry for entry in partitions if entry[2].leader != preferred]
            if len(elsewhere) * 100 <= imbalance_per_broker_percentage * len(partitions):
                continue
            for info, partition_id, part in elsewhere:
                if preferred not in part.isr or not self._cluster_control.is_active(preferred):
                    continue
                record = build_partition_change(
                    info.topic_id,
                    partition_id,
                    part,
                    self._cluster_control.is_active,
                    preferred_election=True,
                )
                if record is not None:
                    records.append(ApiMessageAndVersion.of(record))
                if len(records) >= MAX_ELECTIONS_PER_IMBALANCE:
                    return records
        return records

    def lead_again_after_unfence(self, broker_id: int) -> list[ApiMessageAndVersion]:
        """Kafka ReplicationControlManager.handleBrokerUnfenced: partitions left with no leader whose
        ISR holds ``broker_id`` elect it (it is being unfenced by the records these follow)."""
        records: list[ApiMessageAndVersion] = []
        for info in sorted(self._topics.values(), key=lambda t: t.name):
            for partition_id, part in sorted(info.partitions.items()):
                if part.leader == NO_LEADER and broker_id in part.isr:
                    change = PartitionChangeRecord(
                        partition_id=partition_id, topic_id=info.topic_id, leader=broker_id
                    )
                    records.append(ApiMessageAndVersion.of(change))
        return records

    def replay_partition_change(self, record: Any) -> None:
        info = self._topic_or_raise(uuid_or_zero(record.topic_id), "change partition")
        current = info.partitions.get(record.partition_id)
        if current is None:
            raise MetadataReplayError(f"Unknown partition {info.name}-{record.partition_id}")
        info.partitions[record.partition_id] = current.merge(record)

    def replay_remove_topic(self, record: Any) -> None:
        topic_id = uuid_or_zero(record.topic_id)
        info = self._topics.pop(topic_id, None)
        if info is None:
            raise MetadataReplayError(f"Can't find topic with ID {topic_id} to remove.")
        del self._topics_by_name[info.name]
        unified = unify_collision_chars(info.name)
        names = self._topics_by_unified_name[unified]
        names.discard(info.name)
        if not names:
            del self._topics_by_unified_name[unified]
        self._configuration_control.delete_topic_configs(info.name)

    def _topic_or_raise(self, topic_id: uuid.UUID, action: str) -> TopicControlInfo:
        info = self._topics.get(topic_id)
        if info is None:
            raise MetadataReplayError(
                f"Tried to {action} of {topic_id}, but no topic with that ID was found."
            )
        return info
