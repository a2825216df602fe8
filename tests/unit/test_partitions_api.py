"""CreatePartitions (37) at the edge, pure: the request decoded from the wire into the controller's input,
the controller's results encoded back, and the authorizer's ALTER check per topic (KafkaApis/ControllerApis:
the denied topics answer TOPIC_AUTHORIZATION_FAILED, the others are served)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from pykraft.broker import authorization, partitions_api
from pykraft.controller.replication import CreatePartitionsTopic, CreatePartitionsTopicResult
from pykraft.core.errors import ErrorCode
from pykraft.protocol import messages
from pykraft.protocol.messages import ApiKey
from pykraft.security.acls import (
    AclOperation,
    AclPermissionType,
    AuthorizerConfig,
    PatternType,
    RequestAuthorization,
    ResourceType,
    StandardAcl,
    authorize_request,
)

Topic = CreatePartitionsRequest.CreatePartitionsTopic
Assignment = Topic.CreatePartitionsAssignment


def _request(*topics: Any, validate_only: bool = False) -> Any:
    return CreatePartitionsRequest(topics=list(topics), timeout_ms=1000, validate_only=validate_only)


def _over_the_wire(request: Any, version: int) -> Any:
    request.with_header(correlation_id=7, client_id="admin")
    frame = memoryview(bytes(request.encode(version=version, header=True)))
    header = messages.parse_request_header(frame)
    assert (header.api_key, header.api_version) == (ApiKey.CREATE_PARTITIONS, version)
    return messages.decode_request(header, frame)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_advertised_version_decodes_into_the_controllers_input(version: int) -> None:
    assert messages.is_supported(ApiKey.CREATE_PARTITIONS, version)
    request = _request(
        Topic(name="placed", count=6, assignments=None),
        Topic(
            name="manual", count=3, assignments=[Assignment(broker_ids=[2, 1]), Assignment(broker_ids=[0, 2])]
        ),
    )
    assert partitions_api.topics_to_grow(_over_the_wire(request, version)) == [
        CreatePartitionsTopic("placed", 6, None),
        CreatePartitionsTopic("manual", 3, ((2, 1), (0, 2))),
    ]


@pytest.mark.parametrize("version", [0, 3])
def test_results_encode_with_their_codes_and_messages(version: int) -> None:
    response = partitions_api.create_partitions_response(
        version,
        [
            CreatePartitionsTopicResult("ok", ErrorCode.NONE),
            CreatePartitionsTopicResult(
                "small", ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."
            ),
        ],
    )
    decoded = CreatePartitionsResponse.decode(bytes(response.encode(version=version)), version=version)
    assert [(r.name, r.error_code, r.error_message) for r in decoded.results] == [
        ("ok", 0, None),
        ("small", ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
    ]


def test_no_controller__not_controller_for_every_topic_and_the_grown_counts_skip_failures() -> None:
    request = _request(Topic(name="a", count=2, assignments=None), Topic(name="b", count=5, assignments=None))
    refused = partitions_api.create_partitions_error(request, 3, ErrorCode.NOT_CONTROLLER, "no controller")
    assert partitions_api.result_errors(refused) == [ErrorCode.NOT_CONTROLLER] * 2
    assert partitions_api.grown_counts(request, refused) == {}
    answered = partitions_api.create_partitions_response(
        3,
        [CreatePartitionsTopicResult("a", ErrorCode.NONE), CreatePartitionsTopicResult("b", ErrorCode.NONE)],
    )
    assert partitions_api.grown_counts(request, answered) == {"a": 2, "b": 5}
    validate_only = _request(Topic(name="a", count=2, assignments=None), validate_only=True)
    assert partitions_api.grown_counts(validate_only, answered) == {}


@pytest.fixture
def alice_may_alter() -> Iterator[None]:
    """User:alice may ALTER topics starting with ``mine`` and nothing else."""
    acl = StandardAcl(
        ResourceType.TOPIC,
        "mine",
        PatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    authorize_request(RequestAuthorization("User:alice", "127.0.0.1", [acl], AuthorizerConfig()))
    yield
    authorize_request(None)


@pytest.mark.usefixtures("alice_may_alter")
def test_alter_is_checked_per_topic__denied_ones_answered_the_others_served() -> None:
    request = _request(
        Topic(name="mine-1", count=2, assignments=None),
        Topic(name="theirs", count=2, assignments=None),
        Topic(name="dup", count=2, assignments=None),
        Topic(name="dup", count=3, assignments=None),
        Topic(name="mine-2", count=4, assignments=None),
    )
    assert authorization.refuse(ApiKey.CREATE_PARTITIONS, request, 3) is None
    denied = authorization.split(ApiKey.CREATE_PARTITIONS, request, 3)
    # A name given twice stays for the controller's INVALID_REQUEST, as in Kafka's ControllerApis.
    assert [t.name for t in request.topics] == ["mine-1", "dup", "dup", "mine-2"]
    response = partitions_api.create_partitions_response(
        3,
        [
            CreatePartitionsTopicResult("mine-1", ErrorCode.NONE),
            CreatePartitionsTopicResult("dup", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
            CreatePartitionsTopicResult("mine-2", ErrorCode.NONE),
        ],
    )
    authorization.merge(ApiKey.CREATE_PARTITIONS, response, denied)
    assert [(r.name, r.error_code) for r in response.results] == [
        ("mine-1", ErrorCode.NONE),
        ("dup", ErrorCode.INVALID_REQUEST),
        ("mine-2", ErrorCode.NONE),
        ("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
