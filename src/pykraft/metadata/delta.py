"""MetadataDelta: replay records on top of an image, then ``apply()`` a new image.

Rules (Kafka ``MetadataDelta.java`` and the sub-deltas):

1. ``replay`` is the only way metadata changes; leader, follower and snapshot load replay the same
   records. A record that cannot apply to the current state (a PartitionRecord for an unknown topic, a
   fence with a stale broker epoch, a second, different cluster id) raises ``MetadataReplayError``:
   the log is inconsistent and the caller must stop, not skip.
2. The delta copies a sub-image's map the first time a record touches it and never writes to the base
   image; ``apply()`` shares every untouched sub-image and topic with the base, so applying a delta of
   k records costs O(k + size of the touched maps).
3. The delta does not enforce producer-id monotonicity (Kafka ``ProducerIdsDelta``); the controller's
   ``ProducerIdControlManager`` does. NoOpRecord and the metadata-transaction markers (Begin/End/Abort)
   change nothing here; buffering a transaction until its end is the loader's job.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pykraft.core.quota_configs import QuotaEntity
from pykraft.metadata.image import (
    CONFIG_RESOURCE_TYPE_TOPIC,
    AclsImage,
    BrokerRegistration,
    ClientQuotasImage,
    ClusterImage,
    ConfigResource,
    ConfigurationsImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    ScramImage,
    TopicImage,
    TopicsImage,
    entity_of_record,
    frozen_map,
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
    uuid_or_zero,
)
from pykraft.security.acls import StandardAcl, acl_from_record
from pykraft.security.scram import ScramCredential

# BrokerRegistrationChangeRecord.Fenced (Kafka BrokerRegistrationFencingChange).
FENCING_CHANGE_UNFENCE = -1
FENCING_CHANGE_NONE = 0
FENCING_CHANGE_FENCE = 1


class MetadataDelta:
    """A builder over ``image``; ``replay`` records, then ``apply()``. Single use, single owner."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._offset = image.offset
        self._epoch = image.epoch
        self._features: dict[str, int] | None = None
        self._brokers: dict[int, BrokerRegistration] | None = None
        # Topics whose TopicRecord, partitions or removal this delta replayed; None = removed.
        self._topics_by_id: dict[uuid.UUID, TopicImage] | None = None
        self._topics_by_name: dict[str, TopicImage] | None = None
        self._partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        self._configs: dict[ConfigResource, Mapping[str, str]] | None = None
        self._next_producer_id: int | None = None
        self._scram: dict[tuple[str, int], ScramCredential] | None = None
        self._acls: dict[uuid.UUID, StandardAcl] | None = None
        self._client_quotas: dict[QuotaEntity, Mapping[str, float]] | None = None
        self._cluster_id: str | None = image.cluster_id

    # --- entry points ---------------------------------------------------------------------------

    def replay(self, record: Any, offset: int | None = None, epoch: int | None = None) -> None:
        """Apply one record (an ``ApiMessageAndVersion`` or a bare message) read at ``offset``."""
        message = record.message if isinstance(record, ApiMessageAndVersion) else record
        handler = _HANDLERS.get(type(message))
        if handler is None:
            raise MetadataReplayError(f"no metadata replay for {type(message).__name__}")
        handler(self, message)
        if offset is not None:
            assert offset > self._offset, f"offset {offset} does not follow {self._offset}"
            self._offset = offset
        if epoch is not None:
            assert epoch >= self._epoch, f"epoch {epoch} goes back from {self._epoch}"
            self._epoch = epoch

    def replay_all(self, records: Iterable[Any]) -> None:
        for record in records:
            self.replay(record)

    def set_provenance(self, offset: int, epoch: int) -> None:
        """Mark the delta as covering the log up to ``offset`` (e.g. a snapshot's end offset - 1)."""
        self._offset = offset
        self._epoch = epoch

    def apply(self) -> MetadataImage:
        base = self.image
        features = base.features if self._features is None else FeaturesImage(frozen_map(self._features))
        cluster = base.cluster if self._brokers is None else ClusterImage(frozen_map(self._brokers))
        topics = base.topics if self._topics_by_id is None else self._apply_topics()
        configs = base.configs
        if self._configs is not None:
            configs = ConfigurationsImage(frozen_map({k: frozen_map(v) for k, v in self._configs.items()}))
        producer_ids = base.producer_ids
        if self._next_producer_id is not None:
            producer_ids = ProducerIdsImage(self._next_producer_id)
        scram = base.scram if self._scram is None else ScramImage(frozen_map(self._scram))
        acls = base.acls if self._acls is None else AclsImage(frozen_map(self._acls))
        client_quotas = base.client_quotas
        if self._client_quotas is not None:
            client_quotas = ClientQuotasImage(
                frozen_map({k: frozen_map(dict(v)) for k, v in self._client_quotas.items()})
            )
        return MetadataImage(
            offset=self._offset,
            epoch=self._epoch,
            features=features,
            cluster=cluster,
            topics=topics,
            configs=configs,
            producer_ids=producer_ids,
            scram=scram,
            acls=acls,
            client_quotas=client_quotas,
            cluster_id=self._cluster_id,
        )

    # --- features, cluster id -------------------------------------------------------------------

    def _replay_feature_level(self, record: Any) -> None:
        features = self._mutable_features()
        # Kafka FeaturesDelta: level 0 removes a feature; metadata.version always has a level.
        if record.feature_level == 0 and record.name != MetadataVersion.FEATURE_NAME:
            features.pop(record.name, None)
        else:
            features[record.name] = record.feature_level

    def _replay_cluster_id(self, record: Any) -> None:
        # KIP-1262: the log holds at most one unique cluster id; repeating the same value is fine.
        if self._cluster_id is not None and self._cluster_id != record.cluster_id:
            raise MetadataReplayError(
                f"ClusterIdRecord {record.cluster_id!r} conflicts with cluster id {self._cluster_id!r}"
            )
        self._cluster_id = record.cluster_id

    # --- brokers --------------------------------------------------------------------------------

    def _replay_register_broker(self, record: Any) -> None:
        self._mutable_brokers()[record.broker_id] = BrokerRegistration.from_record(record)

    def _broker_or_raise(self, broker_id: int, broker_epoch: int, action: str) -> BrokerRegistration:
        registration = self._mutable_brokers().get(broker_id)
        if registration is None:
            raise MetadataReplayError(f"cannot {action} broker {broker_id}: it is not registered")
        if registration.broker_epoch != broker_epoch:
            raise MetadataReplayError(
                f"cannot {action} broker {broker_id}: epoch {broker_epoch} is not {registration.broker_epoch}"
            )
        return registration

    def _replay_unregister_broker(self, record: Any) -> None:
        self._broker_or_raise(record.broker_id, record.broker_epoch, "unregister")
        del self._mutable_brokers()[record.broker_id]

    def _replay_fence_broker(self, record: Any) -> None:
        self._replay_registration_change(record.id, record.epoch, FENCING_CHANGE_FENCE)

    def _replay_unfence_broker(self, record: Any) -> None:
        self._replay_registration_change(record.id, record.epoch, FENCING_CHANGE_UNFENCE)

    def _replay_broker_registration_change(self, record: Any) -> None:
        self._replay_registration_change(
            record.broker_id,
            record.broker_epoch,
            record.fenced,
            in_controlled_shutdown_change=record.in_controlled_shutdown,
            log_dirs=record.log_dirs,
        )

    def _replay_registration_change(
        self,
        broker_id: int,
        broker_epoch: int,
        fencing_change: int,
        *,
        in_controlled_shutdown_change: int = 0,
        log_dirs: Any = None,
    ) -> None:
        registration = self._broker_or_raise(broker_id, broker_epoch, "change")
        self._mutable_brokers()[broker_id] = registration_with_change(
            registration, fencing_change, in_controlled_shutdown_change, log_dirs
        )

    # --- topics ---------------------------------------------------------------------------------

    def _replay_topic(self, record: Any) -> None:
        by_id, by_name = self._mutable_topics()
        topic_id = uuid_or_zero(record.topic_id)
        existing = by_name.get(record.name)
        if existing is not None:
            raise MetadataReplayError(
                f"duplicate TopicRecord for {record.name} (topic id {existing.topic_id})"
            )
        if topic_id in by_id:
            raise MetadataReplayError(f"duplicate topic id {topic_id} for {record.name}")
        topic = TopicImage(name=record.name, topic_id=topic_id)
        by_id[topic_id] = topic
        by_name[record.name] = topic
        self._partitions[topic_id] = {}

    def _topic_partitions(self, topic_id: uuid.UUID, what: str) -> dict[int, PartitionRegistration]:
        partitions = self._partitions.get(topic_id)
        if partitions is not None:
            return partitions  # only topics that exist have an entry (removal drops it)
        by_id, _ = self._mutable_topics()
        topic = by_id.get(topic_id)
        if topic is None:
            raise MetadataReplayError(f"{what} for unknown topic id {topic_id}")
        partitions = self._partitions.get(topic_id)
        if partitions is None:
            partitions = dict(topic.partitions)
            self._partitions[topic_id] = partitions
        return partitions

    def _replay_partition(self, record: Any) -> None:
        partitions = self._topic_partitions(uuid_or_zero(record.topic_id), "PartitionRecord")
        partitions[record.partition_id] = PartitionRegistration.from_record(record)

    def replay_partition_registration(
        self, topic_id: uuid.UUID | None, partition_id: int, registration: PartitionRegistration
    ) -> None:
        """What replaying the PartitionRecord ``registration`` was built from does (snapshot loading)."""
        self._topic_partitions(uuid_or_zero(topic_id), "PartitionRecord")[partition_id] = registration

    def _replay_partition_change(self, record: Any) -> None:
        partitions = self._topic_partitions(uuid_or_zero(record.topic_id), "PartitionChangeRecord")
        current = partitions.get(record.partition_id)
        if current is None:
            raise MetadataReplayError(f"PartitionChangeRecord for unknown partition {record.partition_id}")
        partitions[record.partition_id] = current.merge(record)

    def _replay_remove_topic(self, record: Any) -> None:
        by_id, by_name = self._mutable_topics()
        topic_id = uuid_or_zero(record.topic_id)
        topic = by_id.pop(topic_id, None)
        if topic is None:
            raise MetadataReplayError(f"RemoveTopicRecord for unknown topic id {topic_id}")
        del by_name[topic.name]
        self._partitions.pop(topic_id, None)
        # Kafka MetadataDelta: removing a topic also deletes its configs.
        self._mutable_configs().pop(ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, topic.name), None)

    def _apply_topics(self) -> TopicsImage:
        assert self._topics_by_id is not None
        assert self._topics_by_name is not None
        by_id = self._topics_by_id
        for topic_id, partitions in self._partitions.items():
            topic = by_id[topic_id]
            by_id[topic_id] = TopicImage(topic.name, topic.topic_id, frozen_map(partitions))
        by_name = {topic.name: topic for topic in by_id.values()}
        self._partitions = {}
        return TopicsImage(frozen_map(by_id), frozen_map(by_name))

    # --- configs, producer ids ------------------------------------------------------------------

    def _replay_config(self, record: Any) -> None:
        configs = self._mutable_configs()
        resource = ConfigResource(record.resource_type, record.resource_name)
        current = configs.get(resource)
        updated = {} if current is None else dict(current)
        if record.value is None:
            updated.pop(record.name, None)
        else:
            updated[record.name] = record.value
        if updated:
            configs[resource] = updated
        else:
            configs.pop(resource, None)

    def _replay_producer_ids(self, record: Any) -> None:
        # Kafka ProducerIdsDelta copies NextProducerId; monotonicity is the controller's check.
        self._next_producer_id = record.next_producer_id

    # --- SCRAM credentials, ACLs ------------------------------------------------------------------

    def _replay_user_scram_credential(self, record: Any) -> None:
        if self._scram is None:
            self._scram = dict(self.image.scram.credentials)
        self._scram[(record.name, record.mechanism)] = ScramCredential(
            bytes(record.salt), bytes(record.stored_key), bytes(record.server_key), record.iterations
        )

    def _replay_remove_user_scram_credential(self, record: Any) -> None:
        if self._scram is None:
            self._scram = dict(self.image.scram.credentials)
        if self._scram.pop((record.name, record.mechanism), None) is None:
            # Kafka ScramImage: removing a credential that is not there is an inconsistent log.
            raise MetadataReplayError(
                f"no SCRAM credential of {record.name} for mechanism {record.mechanism}"
            )

    def _replay_access_control_entry(self, record: Any) -> None:
        if self._acls is None:
            self._acls = dict(self.image.acls.acls)
        acl_id, acl = acl_from_record(record)
        self._acls[acl_id] = acl

    def _replay_remove_access_control_entry(self, record: Any) -> None:
        if self._acls is None:
            self._acls = dict(self.image.acls.acls)
        if self._acls.pop(uuid_or_zero(record.id), None) is None:
            raise MetadataReplayError(f"no ACL with id {record.id}")

    def _replay_client_quota(self, record: Any) -> None:
        # Kafka ClientQuotaDelta: set or remove one key; an entity with no key left is gone.
        if self._client_quotas is None:
            self._client_quotas = dict(self.image.client_quotas.entities)
        entity = entity_of_record(record)
        quotas = dict(self._client_quotas.get(entity, {}))
        if record.remove:
            quotas.pop(record.key, None)
        else:
            quotas[record.key] = record.value
        if quotas:
            self._client_quotas[entity] = quotas
        else:
            self._client_quotas.pop(entity, None)

    # --- copy on first write --------------------------------------------------------------------

    def _mutable_features(self) -> dict[str, int]:
        if self._features is None:
            self._features = dict(self.image.features.finalized_versions)
        return self._features

    def _mutable_brokers(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.image.cluster.brokers)
        return self._brokers

    def _mutable_topics(self) -> tuple[dict[uuid.UUID, TopicImage], dict[str, TopicImage]]:
        if self._topics_by_id is None or self._topics_by_name is None:
            self._topics_by_id = dict(self.image.topics.topics_by_id)
            self._topics_by_name = dict(self.image.topics.topics_by_name)
        return self._topics_by_id, self._topics_by_name

    def _mutable_configs(self) -> dict[ConfigResource, Mapping[str, str]]:
        if self._configs is None:
            # Inner maps stay shared until _replay_config copies the one it changes.
            self._configs = dict(self.image.configs.resources)
        return self._configs


def _ignore(_delta: MetadataDelta, _record: Any) -> None:
    return None


# By message type; unbound, so a delta holds no reference cycle and is freed as soon as it is dropped.
_HANDLERS: dict[type[Any], Callable[[MetadataDelta, Any], None]] = {
    FeatureLevelRecord: MetadataDelta._replay_feature_level,
    ClusterIdRecord: MetadataDelta._replay_cluster_id,
    RegisterBrokerRecord: MetadataDelta._replay_register_broker,
    UnregisterBrokerRecord: MetadataDelta._replay_unregister_broker,
    FenceBrokerRecord: MetadataDelta._replay_fence_broker,
    UnfenceBrokerRecord: MetadataDelta._replay_unfence_broker,
    BrokerRegistrationChangeRecord: MetadataDelta._replay_broker_registration_change,
    TopicRecord: MetadataDelta._replay_topic,
    PartitionRecord: MetadataDelta._replay_partition,
    PartitionChangeRecord: MetadataDelta._replay_partition_change,
    RemoveTopicRecord: MetadataDelta._replay_remove_topic,
    ConfigRecord: MetadataDelta._replay_config,
    ProducerIdsRecord: MetadataDelta._replay_producer_ids,
    UserScramCredentialRecord: MetadataDelta._replay_user_scram_credential,
    RemoveUserScramCredentialRecord: MetadataDelta._replay_remove_user_scram_credential,
    AccessControlEntryRecord: MetadataDelta._replay_access_control_entry,
    RemoveAccessControlEntryRecord: MetadataDelta._replay_remove_access_control_entry,
    ClientQuotaRecord: MetadataDelta._replay_client_quota,
    NoOpRecord: _ignore,
    BeginTransactionRecord: _ignore,
    EndTransactionRecord: _ignore,
    AbortTransactionRecord: _ignore,
}


def registration_with_change(
    registration: BrokerRegistration,
    fencing_change: int,
    in_controlled_shutdown_change: int,
    log_dirs: Any,
) -> BrokerRegistration:
    """Kafka BrokerRegistration.cloneWith: apply a fence/unfence/controlled-shutdown/log-dirs change."""
    if fencing_change not in (FENCING_CHANGE_UNFENCE, FENCING_CHANGE_NONE, FENCING_CHANGE_FENCE):
        raise MetadataReplayError(f"unknown value for fenced field: {fencing_change}")
    if in_controlled_shutdown_change not in (0, 1):
        raise MetadataReplayError(
            f"unknown value for inControlledShutdown field: {in_controlled_shutdown_change}"
        )
    fenced = registration.fenced
    if fencing_change == FENCING_CHANGE_FENCE:
        fenced = True
    elif fencing_change == FENCING_CHANGE_UNFENCE:
        fenced = False
    in_controlled_shutdown = registration.in_controlled_shutdown or in_controlled_shutdown_change == 1
    dirs = registration.log_dirs
    if log_dirs:
        dirs = tuple(uuid_or_zero(d) for d in log_dirs)
    return BrokerRegistration(
        broker_id=registration.broker_id,
        incarnation_id=registration.incarnation_id,
        broker_epoch=registration.broker_epoch,
        listeners=registration.listeners,
        supported_features=registration.supported_features,
        rack=registration.rack,
        fenced=fenced,
        in_controlled_shutdown=in_controlled_shutdown,
        is_migrating_zk_broker=registration.is_migrating_zk_broker,
        log_dirs=dirs,
    )


def load_snapshot(records: Iterable[Any], offset: int, epoch: int) -> MetadataImage:
    """Build an image from snapshot records (an image written by ``image_records``) covering ``offset``."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay_all(records)
    delta.set_provenance(offset, epoch)
    return delta.apply()
