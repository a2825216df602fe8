"""The metadata image: a frozen view of the cluster metadata after some prefix of the metadata log.

Rules (Kafka ``MetadataImage``/``*Image.java``; anchors.md §3.7):

1. An image is immutable. Brokers read images and never change them; ``MetadataDelta`` (delta.py) is
   the short-lived builder that replays records and ``apply()``s a new image, sharing every sub-image
   (and every topic) it did not touch.
2. An image written as records (``image_records``) is what a snapshot contains. Replaying those
   records into an empty delta gives an equal image (tested as a property).
3. The registrations here (``BrokerRegistration``, ``PartitionRegistration``) are also what the
   controller keeps, so the two replay paths read records the same way.

Invariants: ``topics.topics_by_id`` and ``topics.topics_by_name`` hold the same ``TopicImage`` objects;
every partition's ``directories`` has one entry per replica; ``producer_ids.next_producer_id`` is -1
until the first block is handed out (kafka-facts.md §1.5).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final, NamedTuple, TypeVar

from pykraft.core.quota_configs import QuotaEntity, entity_pair_order, quota_entity
from pykraft.core.uuid import ZERO_UUID
from pykraft.metadata.records import (
    AccessControlEntryRecord,
    ApiMessageAndVersion,
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataVersion,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    uuid_or_zero,
)
from pykraft.security.acls import StandardAcl
from pykraft.security.scram import ScramCredential

# Kafka DirectoryId.MIGRATING (0, 0): the directory of a replica is not known (pre-KIP-858 records).
DIRECTORY_ID_MIGRATING: Final = ZERO_UUID
# Kafka DirectoryId.UNASSIGNED (0, 1): a replica not yet placed on a directory.
DIRECTORY_ID_UNASSIGNED: Final = uuid.UUID(int=1)

# Kafka ConfigResource.Type ids as carried by ConfigRecord.ResourceType.
CONFIG_RESOURCE_TYPE_TOPIC: Final = 2
CONFIG_RESOURCE_TYPE_BROKER: Final = 4
CONFIG_RESOURCE_TYPE_GROUP: Final = 32

# SecurityProtocol ids as carried by RegisterBrokerRecord.EndPoints[].SecurityProtocol.
SECURITY_PROTOCOL_PLAINTEXT: Final = 0
SECURITY_PROTOCOL_SSL: Final = 1
SECURITY_PROTOCOL_SASL_PLAINTEXT: Final = 2
SECURITY_PROTOCOL_SASL_SSL: Final = 3

# PartitionRecord.Leader when there is no leader; PartitionChangeRecord.Leader when it did not change.
NO_LEADER: Final = -1
NO_LEADER_CHANGE: Final = -2
# PartitionChangeRecord.LeaderRecoveryState when it did not change.
NO_LEADER_RECOVERY_STATE_CHANGE: Final = -1


K = TypeVar("K")
V = TypeVar("V")


def frozen_map(items: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only view over a private copy (images never share a mutable dict with a builder)."""
    return MappingProxyType(dict(items))


_EMPTY_MAP: Final[Mapping[Any, Any]] = MappingProxyType({})


# --- features -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    """Finalized feature levels by name; ``metadata.version`` is one of them (FeatureLevelRecord)."""

    finalized_versions: Mapping[str, int] = field(default_factory=lambda: _EMPTY_MAP)

    @property
    def metadata_version(self) -> int:
        """The ``metadata.version`` feature level, 0 when no FeatureLevelRecord set it yet."""
        return self.finalized_versions.get(MetadataVersion.FEATURE_NAME, 0)


# --- cluster ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One listener of a broker (RegisterBrokerRecord.EndPoints[])."""

    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerFeature:
    """A feature range a broker supports (RegisterBrokerRecord.Features[])."""

    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker (Kafka ``BrokerRegistration``); ``broker_epoch`` is the registration offset."""

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    listeners: tuple[BrokerEndpoint, ...]
    supported_features: tuple[BrokerFeature, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()

    @classmethod
    def from_record(cls, record: Any) -> BrokerRegistration:
        return cls(
            broker_id=record.broker_id,
            incarnation_id=uuid_or_zero(record.incarnation_id),
            broker_epoch=record.broker_epoch,
            listeners=tuple(
                BrokerEndpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points
            ),
            supported_features=tuple(
                BrokerFeature(f.name, f.min_supported_version, f.max_supported_version)
                for f in record.features
            ),
            rack=record.rack,
            fenced=bool(record.fenced),
            in_controlled_shutdown=bool(record.in_controlled_shutdown),
            is_migrating_zk_broker=bool(record.is_migrating_zk_broker),
            log_dirs=tuple(uuid_or_zero(d) for d in (record.log_dirs or ())),
        )

    def to_record(self, metadata_version: int) -> ApiMessageAndVersion:
        version = MetadataVersion.register_broker_record_version(metadata_version)
        record = RegisterBrokerRecord(
            broker_id=self.broker_id,
            is_migrating_zk_broker=self.is_migrating_zk_broker,
            incarnation_id=self.incarnation_id,
            broker_epoch=self.broker_epoch,
            end_points=[
                RegisterBrokerRecord.BrokerEndpoint(
                    name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
                )
                for e in self.listeners
            ],
            features=[
                RegisterBrokerRecord.BrokerFeature(
                    name=f.name,
                    min_supported_version=f.min_supported_version,
                    max_supported_version=f.max_supported_version,
                )
                for f in self.supported_features
            ],
            rack=self.rack,
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=list(self.log_dirs),
        )
        return ApiMessageAndVersion.of(record, version)


@dataclass(frozen=True, slots=True)
class ClusterImage:
    """Registered brokers by id."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY_MAP)

    def unfenced_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)


# --- topics -------------------------------------------------------------------------------------


def _int_tuple(values: Any) -> tuple[int, ...]:
    # Decoded arrays are lists of int already (tuple() of a list is one C call; this runs 2M times on a
    # 1M-record restart).
    return tuple(values) if values is not None else ()


def _directories_for(directories: Any, replica_count: int) -> tuple[uuid.UUID, ...]:
    """Kafka PartitionRegistration.defaultToMigrating: one directory per replica, MIGRATING if unknown."""
    dirs = tuple(directories) if directories is not None else ()
    if len(dirs) != replica_count:
        return (DIRECTORY_ID_MIGRATING,) * replica_count
    if None in dirs:
        return tuple(ZERO_UUID if d is None else d for d in dirs)
    return dirs


# The controller and the image replay every record they both see into equal registrations; the last
# (record -> registration) and (registration, change -> registration) results are kept so the second
# replay of the same record on the same registration reuses the first one's (immutable) result instead
# of building an equal one (bench/metadata_restart.py: a third of a restart). Identity checks only, and
# the memo holds its keys alive, so a hit is always the same computation.
_from_record_memo: list[Any] = [None, None]
_merge_memo: list[Any] = [None, None, None]


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's replicas, ISR and leadership (Kafka ``PartitionRegistration``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    directories: tuple[uuid.UUID, ...] = ()
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, record: Any) -> PartitionRegistration:
        memo = _from_record_memo
        if memo[0] is record and type(memo[1]) is cls:
            return memo[1]
        replicas = _int_tuple(record.replicas)
        registration = cls(
            replicas,
            _int_tuple(record.isr),
            record.leader,
            record.leader_epoch,
            record.partition_epoch,
            _int_tuple(record.removing_replicas),
            _int_tuple(record.adding_replicas),
            record.leader_recovery_state,
            _directories_for(record.directories, len(replicas)),
            _int_tuple(record.eligible_leader_replicas),
            _int_tuple(record.last_known_elr),
        )
        memo[0], memo[1] = record, registration
        return registration

    @classmethod
    def of_untagged(cls, fields: Any) -> PartitionRegistration:
        """From ``decode_partition_record_fields`` (a PartitionRecord without tagged fields): equal to
        ``from_record`` of the same record."""
        _, _, replicas, isr, removing, adding, leader, leader_epoch, partition_epoch, directories = fields
        return cls(
            replicas,
            isr,
            leader,
            leader_epoch,
            partition_epoch,
            removing,
            adding,
            0,
            _directories_for(directories, len(replicas)),
            (),
            (),
        )

    def merge(self, record: Any) -> PartitionRegistration:
        """Apply a PartitionChangeRecord (Kafka PartitionRegistration.merge): null fields keep their value,
        a leader change bumps the leader epoch, and every change bumps the partition epoch."""
        memo = _merge_memo
        if memo[0] is self and memo[1] is record:
            return memo[2]
        replicas = self.replicas if record.replicas is None else _int_tuple(record.replicas)
        if record.directories is None and record.replicas is None and len(self.directories) == len(replicas):
            directories = self.directories
        else:
            directories = _directories_for(
                self.directories if record.directories is None else record.directories, len(replicas)
            )
        if record.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = record.leader, self.leader_epoch + 1
        recovery = record.leader_recovery_state
        isr = record.isr
        removing = record.removing_replicas
        adding = record.adding_replicas
        elr = record.eligible_leader_replicas
        last_known_elr = record.last_known_elr
        merged = PartitionRegistration(
            replicas,
            self.isr if isr is None else _int_tuple(isr),
            leader,
            leader_epoch,
            self.partition_epoch + 1,
            self.removing_replicas if removing is None else _int_tuple(removing),
            self.adding_replicas if adding is None else _int_tuple(adding),
            self.leader_recovery_state if recovery == NO_LEADER_RECOVERY_STATE_CHANGE else recovery,
            directories,
            self.eligible_leader_replicas if elr is None else _int_tuple(elr),
            self.last_known_elr if last_known_elr is None else _int_tuple(last_known_elr),
        )
        memo[0], memo[1], memo[2] = self, record, merged
        return merged

    def to_record(
        self, topic_id: uuid.UUID, partition_id: int, metadata_version: int
    ) -> ApiMessageAndVersion:
        version = MetadataVersion.partition_record_version(metadata_version)
        record = PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=list(self.replicas),
            isr=list(self.isr),
            removing_replicas=list(self.removing_replicas),
            adding_replicas=list(self.adding_replicas),
            leader=self.leader,
            leader_recovery_state=self.leader_recovery_state,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            directories=list(self.directories),
            # Tagged and nullable from v2: null (absent) is how an empty ELR is written.
            eligible_leader_replicas=list(self.eligible_leader_replicas) or None,
            last_known_elr=list(self.last_known_elr) or None,
        )
        return ApiMessageAndVersion.of(record, version)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: _EMPTY_MAP)


@dataclass(frozen=True, slots=True)
class TopicsImage:
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: _EMPTY_MAP)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY_MAP)

    def get_topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)


# --- configs, producer ids ------------------------------------------------------------------------


class ConfigResource(NamedTuple):
    """A config owner: ConfigRecord.ResourceType and ResourceName (e.g. (2, "my-topic"))."""

    resource_type: int
    resource_name: str


@dataclass(frozen=True, slots=True)
class ConfigurationsImage:
    """Explicitly set configs per resource; a ConfigRecord with a null Value deletes the key."""

    resources: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=lambda: _EMPTY_MAP)

    def configs_for(self, resource: ConfigResource) -> Mapping[str, str]:
        return self.resources.get(resource, _EMPTY_MAP)


@dataclass(frozen=True, slots=True)
class ScramImage:
    """SCRAM credentials by (user name, mechanism id): UserScramCredentialRecord adds or replaces one,
    RemoveUserScramCredentialRecord removes it."""

    credentials: Mapping[tuple[str, int], ScramCredential] = field(default_factory=lambda: _EMPTY_MAP)

    def credential(self, user: str, mechanism: int) -> ScramCredential | None:
        return self.credentials.get((user, mechanism))


@dataclass(frozen=True, slots=True)
class AclsImage:
    """ACLs by id: AccessControlEntryRecord adds one, RemoveAccessControlEntryRecord removes it."""

    acls: Mapping[uuid.UUID, StandardAcl] = field(default_factory=lambda: _EMPTY_MAP)


@dataclass(frozen=True, slots=True)
class ClientQuotasImage:
    """Client quotas by entity (KIP-546, Kafka ClientQuotasImage): a ClientQuotaRecord sets or removes
    one key of one entity; an entity with no key left is gone."""

    entities: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY_MAP)


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    """KIP-730: the first id of the next block, -1 when no block was ever handed out (§1.5)."""

    next_producer_id: int = -1


# --- the image ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """Everything the metadata log says, up to and including ``offset`` (written in leader ``epoch``)."""

    EMPTY: ClassVar[MetadataImage]

    offset: int = -1
    epoch: int = -1
    features: FeaturesImage = field(default_factory=FeaturesImage)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: ConfigurationsImage = field(default_factory=ConfigurationsImage)
    producer_ids: ProducerIdsImage = field(default_factory=ProducerIdsImage)
    scram: ScramImage = field(default_factory=ScramImage)
    acls: AclsImage = field(default_factory=AclsImage)
    client_quotas: ClientQuotasImage = field(default_factory=ClientQuotasImage)
    # KIP-1262: set by the ClusterIdRecord; None until the log carries one.
    cluster_id: str | None = None

    @property
    def metadata_version(self) -> int:
        return self.features.metadata_version

    def is_empty(self) -> bool:
        return self == MetadataImage.EMPTY


MetadataImage.EMPTY = MetadataImage()


def image_records(image: MetadataImage) -> list[ApiMessageAndVersion]:
    """The image as records, in the order a snapshot holds them (Kafka ``MetadataImage.write``).

    metadata.version comes first because readers need it to interpret the rest; the KIP-1262 cluster
    id opens the cluster section (N ``ClusterImage.write``); only the latest producer-id block survives,
    as one ProducerIdsRecord with BrokerId -1 and BrokerEpoch -1 (kafka-facts.md §1.5).
    """
    metadata_version = image.metadata_version
    records: list[ApiMessageAndVersion] = []
    features = image.features.finalized_versions
    if MetadataVersion.FEATURE_NAME in features:
        records.append(_feature_record(MetadataVersion.FEATURE_NAME, features[MetadataVersion.FEATURE_NAME]))
    for name in sorted(features):
        if name != MetadataVersion.FEATURE_NAME:
            records.append(_feature_record(name, features[name]))
    if image.cluster_id is not None:
        records.append(ApiMessageAndVersion.of(ClusterIdRecord(cluster_id=image.cluster_id)))
    for broker_id in sorted(image.cluster.brokers):
        records.append(image.cluster.brokers[broker_id].to_record(metadata_version))
    for name in sorted(image.topics.topics_by_name):
        topic = image.topics.topics_by_name[name]
        records.append(ApiMessageAndVersion.of(TopicRecord(name=topic.name, topic_id=topic.topic_id)))
        for partition_id in sorted(topic.partitions):
            records.append(
                topic.partitions[partition_id].to_record(topic.topic_id, partition_id, metadata_version)
            )
    for resource in sorted(image.configs.resources):
        configs = image.configs.resources[resource]
        for key in sorted(configs):
            record = ConfigRecord(
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                name=key,
                value=configs[key],
            )
            records.append(ApiMessageAndVersion.of(record))
    if image.producer_ids.next_producer_id >= 0:
        record = ProducerIdsRecord(
            broker_id=-1, broker_epoch=-1, next_producer_id=image.producer_ids.next_producer_id
        )
        records.append(ApiMessageAndVersion.of(record))
    for (user, mechanism), credential in sorted(image.scram.credentials.items()):
        records.append(scram_record(user, mechanism, credential))
    for acl_id, acl in sorted(image.acls.acls.items()):
        records.append(acl_record(acl_id, acl))
    for entity, quotas in sorted(image.client_quotas.entities.items(), key=_entity_order):
        records.extend(client_quota_record(entity, key, quotas[key]) for key in sorted(quotas))
    return records


def _entity_order(item: tuple[QuotaEntity, object]) -> list[tuple[str, bool, str]]:
    return [entity_pair_order(pair) for pair in item[0]]


def client_quota_record(entity: QuotaEntity, key: str, value: float | None) -> ApiMessageAndVersion:
    """A ClientQuotaRecord setting ``key`` of ``entity`` to ``value``, or removing it (None)."""
    entity_data = ClientQuotaRecord.EntityData
    return ApiMessageAndVersion.of(
        ClientQuotaRecord(
            entity=[entity_data(entity_type=kind, entity_name=name) for kind, name in entity],
            key=key,
            value=0.0 if value is None else value,
            remove=value is None,
        )
    )


def entity_of_record(record: ClientQuotaRecord) -> QuotaEntity:
    return quota_entity((e.entity_type, e.entity_name) for e in record.entity)


def scram_record(user: str, mechanism: int, credential: ScramCredential) -> ApiMessageAndVersion:
    return ApiMessageAndVersion.of(
        UserScramCredentialRecord(
            name=user,
            mechanism=mechanism,
            salt=credential.salt,
            stored_key=credential.stored_key,
            server_key=credential.server_key,
            iterations=credential.iterations,
        )
    )


def acl_record(acl_id: uuid.UUID, acl: StandardAcl) -> ApiMessageAndVersion:
    return ApiMessageAndVersion.of(
        AccessControlEntryRecord(
            id=acl_id,
            resource_type=acl.resource_type,
            resource_name=acl.resource_name,
            pattern_type=acl.pattern_type,
            principal=acl.principal,
            host=acl.host,
            operation=acl.operation,
            permission_type=acl.permission_type,
        )
    )


def _feature_record(name: str, level: int) -> ApiMessageAndVersion:
    return ApiMessageAndVersion.of(FeatureLevelRecord(name=name, feature_level=level))
