"""DescribeCluster (60), DescribeTopicPartitions (75) and DescribeLogDirs (35) on the wire, beyond the
table-driven round trips of test_messages.py (which fill every field): the null forms clients send
(every log dir, no cursor), decoded whole, one byte at a time, with trailing bytes, and fuzzed; and
the sentinels of the answers (Int.MIN for authorized operations nobody asked for)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)

from pykraft.core.errors import RemoteProtocolError
from pykraft.protocol import messages
from pykraft.protocol.messages import SUPPORTED_VERSIONS, ApiKey, RequestHeader


def _frame(request: Any, version: int) -> bytes:
    request.with_header(correlation_id=11, client_id="adminclient-1")
    return bytes(request.encode(version=version, header=True))


def _requests() -> list[tuple[str, Any, int]]:
    cases: list[tuple[str, Any, int]] = []
    low, high = SUPPORTED_VERSIONS[ApiKey.DESCRIBE_LOG_DIRS]
    for version in range(low, high + 1):
        cases.append((f"log-dirs-all-v{version}", DescribeLogDirsRequest(topics=None), version))
        cases.append((f"log-dirs-none-v{version}", DescribeLogDirsRequest(topics=[]), version))
        named = DescribeLogDirsRequest(
            topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic="orders", partitions=[0, 3])]
        )
        cases.append((f"log-dirs-named-v{version}", named, version))
    cases.append(("dtp-all", DescribeTopicPartitionsRequest(topics=[], response_partition_limit=7), 0))
    cases.append(
        (
            "dtp-cursor",
            DescribeTopicPartitionsRequest(
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name="orders")],
                response_partition_limit=2000,
                cursor=DescribeTopicPartitionsRequest.Cursor(topic_name="orders", partition_index=4),
            ),
            0,
        )
    )
    low, high = SUPPORTED_VERSIONS[ApiKey.DESCRIBE_CLUSTER]
    for version in range(low, high + 1):
        fields: dict[str, Any] = {"include_cluster_authorized_operations": True}
        if version >= 1:
            fields["endpoint_type"] = 2
        if version >= 2:
            fields["include_fenced_brokers"] = True
        cases.append((f"cluster-v{version}", DescribeClusterRequest(**fields), version))
    return cases


REQUESTS = _requests()


@pytest.mark.parametrize(("name", "request_", "version"), REQUESTS, ids=[c[0] for c in REQUESTS])
def test_requests_whole_byte_by_byte_and_with_trailing_bytes(name: str, request_: Any, version: int) -> None:
    frame = _frame(request_, version)
    header = messages.parse_request_header(memoryview(frame))
    decoded = messages.decode_request(header, memoryview(frame))
    assert decoded == request_
    for size in range(len(frame)):
        with pytest.raises(RemoteProtocolError):
            header = messages.parse_request_header(memoryview(frame[:size]))
            messages.decode_request(header, memoryview(frame[:size]))
    assert messages.decode_request(header, memoryview(frame + b"\x00\x01")) == request_


def test_null_forms_decode_as_null() -> None:
    frame = _frame(DescribeLogDirsRequest(topics=None), 4)
    header = messages.parse_request_header(memoryview(frame))
    assert messages.decode_request(header, memoryview(frame)).topics is None
    frame = _frame(DescribeTopicPartitionsRequest(topics=[], response_partition_limit=1), 0)
    header = messages.parse_request_header(memoryview(frame))
    decoded = messages.decode_request(header, memoryview(frame))
    assert (decoded.topics, decoded.cursor) == ([], None)
    # The cursor is a nullable struct: -1 (compact 0) when absent, as Kafka writes it.
    assert frame.endswith(b"\x00\x00\x00\x01\xff\x00")


def _encode(api_key: int, version: int, response: Any) -> bytes:
    header = RequestHeader(api_key, version, 3, None, 0, messages.is_flexible(api_key, version))
    return bytes(messages.encode_response(header, response))


def test_authorized_operations_not_asked_for_are_int_min_on_the_wire() -> None:
    response = DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id="c",
        controller_id=1,
        brokers=[],
        authorized_operations=None,
    )
    framed = _encode(ApiKey.DESCRIBE_CLUSTER, 1, response)
    # ..., brokers (compact empty), ClusterAuthorizedOperations, tagged fields.
    assert framed[-6:] == b"\x01" + struct.pack(">i", -(2**31)) + b"\x00"
    topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
        error_code=29,
        name="t",
        topic_id=None,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=-(2**31),
    )
    framed = _encode(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[topic], next_cursor=None),
    )
    # ..., partitions (compact empty), TopicAuthorizedOperations, topic tags; NextCursor null; tags.
    assert framed[-8:] == b"\x01" + struct.pack(">i", -(2**31)) + b"\x00\xff\x00"


_FRAMES = [_frame(request, version) for _, request, version in REQUESTS]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    frame=st.sampled_from(_FRAMES),
    position=st.integers(0, 10_000),
    replacement=st.binary(min_size=1, max_size=4),
    delete=st.integers(0, 4),
)
def test_fuzzed_requests_decode_or_raise_remote_protocol_error(
    frame: bytes, position: int, replacement: bytes, delete: int
) -> None:
    position %= len(frame)
    mutated = frame[:position] + replacement + frame[position + delete :]
    try:
        header = messages.parse_request_header(memoryview(mutated))
        messages.decode_request(header, memoryview(mutated))
    except RemoteProtocolError:
        pass
