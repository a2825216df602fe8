"""Null where the schema has no nullableVersions is a malformed request, refused at decode time (Kafka's
generated readers throw "non-nullable field ... was serialized as null"), so no handler meets it."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from pykraft.core.errors import RemoteProtocolError
from pykraft.protocol import messages


def _decode(request: object, version: int) -> object:
    request.API_VERSION = version  # type: ignore[attr-defined]
    request.with_header(correlation_id=1, client_id="t")  # type: ignore[attr-defined]
    frame = memoryview(bytes(request.encode(version=version, header=True, framed=False)))  # type: ignore[attr-defined]
    return messages.decode_request(messages.parse_request_header(frame), frame)


@pytest.mark.parametrize("version", [4, 11, 12, 13])
def test_a_fetch_whose_topics_are_null_is_malformed(version: int) -> None:
    with pytest.raises(RemoteProtocolError, match="non-nullable field topics is null"):
        _decode(FetchRequest(max_wait_ms=0, min_bytes=1, topics=None), version)


def test_a_nested_null_names_its_path_and_nullable_fields_pass() -> None:
    topic = CreateTopicsRequest.CreatableTopic(
        name="t", num_partitions=1, replication_factor=1, assignments=None, configs=[]
    )
    with pytest.raises(RemoteProtocolError, match="topics.assignments is null"):
        _decode(CreateTopicsRequest(topics=[topic], timeout_ms=1000, validate_only=False), 5)
    # Metadata's topics are nullable (all topics): decoded as None, not refused.
    assert _decode(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12).topics is None  # type: ignore[attr-defined]


def test_an_array_of_strings_holds_no_null() -> None:
    from kafka.protocol.admin import ListGroupsRequest

    with pytest.raises(RemoteProtocolError, match=r"types_filter\[\] is null"):
        _decode(ListGroupsRequest(states_filter=[], types_filter=["classic", None]), 5)
