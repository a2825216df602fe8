"""The hand-coded MetadataResponse topic entry (pykraft.protocol.metadata_topic) against kafka-python's
generic encoder of the same schema, at every version."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.metadata import MetadataResponse

from pykraft.protocol.messages import AUTHORIZED_OPERATIONS_OMITTED, array_entry_encoder
from pykraft.protocol.metadata_topic import (
    METADATA_FIRST_FLEXIBLE_VERSION,
    MetadataPartition,
    encode_metadata_topic,
)

Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition
VERSIONS = range(0, 13)
_generic = {flexible: array_entry_encoder(Topic, flexible) for flexible in (False, True)}

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
nodes = st.lists(int32, max_size=200)  # past 127 elements a compact count takes two bytes
partitions = st.lists(
    st.builds(MetadataPartition, int16, int32, int32, int32, nodes, nodes, nodes), max_size=5
)


def _generic_bytes(
    version: int,
    name: str | None,
    topic_id: uuid.UUID,
    is_internal: bool,
    parts: list[MetadataPartition],
    operations: int,
    error_code: int,
) -> bytes:
    topic = Topic(
        error_code=error_code,
        name=name,
        topic_id=topic_id,
        is_internal=is_internal,
        partitions=[
            Partition(
                error_code=p.error_code,
                partition_index=p.partition_index,
                leader_id=p.leader_id,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replica_nodes),
                isr_nodes=list(p.isr_nodes),
                offline_replicas=list(p.offline_replicas),
            )
            for p in parts
        ],
        # kafka-python's field is a set of bits; None is Integer.MIN_VALUE (not requested).
        authorized_operations=None
        if operations == AUTHORIZED_OPERATIONS_OMITTED
        else {bit for bit in range(31) if operations >> bit & 1},
    )
    return _generic[version >= METADATA_FIRST_FLEXIBLE_VERSION](topic, version)


@given(
    version=st.sampled_from(VERSIONS),
    name=st.text(max_size=300),
    topic_id=st.uuids(),
    is_internal=st.booleans(),
    parts=partitions,
    operations=st.one_of(st.just(AUTHORIZED_OPERATIONS_OMITTED), st.integers(0, 2**31 - 1)),
    error_code=int16,
)
def test_every_version_encodes_as_kafka_python_does(
    version: int,
    name: str,
    topic_id: uuid.UUID,
    is_internal: bool,
    parts: list[MetadataPartition],
    operations: int,
    error_code: int,
) -> None:
    ours = encode_metadata_topic(
        version,
        error_code=error_code,
        name=name,
        topic_id=topic_id,
        is_internal=is_internal,
        partitions=parts,
        authorized_operations=operations,
    )
    assert ours == _generic_bytes(version, name, topic_id, is_internal, parts, operations, error_code)


def test_an_unknown_topic_id_is_answered_with_a_null_name() -> None:
    # UNKNOWN_TOPIC_ID entries (v10+) carry no name.
    for version in (10, 11, 12):
        topic_id = uuid.uuid4()
        ours = encode_metadata_topic(
            version,
            error_code=100,
            name=None,
            topic_id=topic_id,
            is_internal=False,
            partitions=(),
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
        assert ours == _generic_bytes(version, None, topic_id, False, [], AUTHORIZED_OPERATIONS_OMITTED, 100)
        assert ours[2] == 0  # compact null string
