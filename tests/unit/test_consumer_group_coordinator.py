"""KIP-848 consumer groups inside the group coordinator (issue 19): a group id is classic or consumer,
commits check member epochs, ListGroups/DescribeGroups/DeleteGroups see the type, the records written
through the coordinator's write path bring a consumer group back on load."""

from __future__ import annotations

import random
import uuid

from pykraft.coordinator.consumer_group import HeartbeatRequest, TopicInfo
from pykraft.coordinator.group_coordinator import (
    CommitOffset,
    CommitRequest,
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
)
from pykraft.coordinator.offsets_records import assigned_partitions, subscribed_topics
from pykraft.core.errors import ErrorCode

TOPICS = {"t": TopicInfo(uuid.UUID(int=1), 4)}
NOW_MS = 1_000_000


def _coordinator() -> GroupCoordinator:
    coord = GroupCoordinator(
        GroupConfig(
            offsets_topic_num_partitions=4, group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1
        ),
        random.Random(3),
    )
    coord.owned_partitions.update(range(4))
    return coord


def _join_consumer(coord: GroupCoordinator, group: str, member: str) -> int:
    result = coord.consumer_group_heartbeat(
        HeartbeatRequest(
            group, member, 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), topic_partitions=()
        ),
        TOPICS,
        NOW_MS,
    )
    assert result.error_code == ErrorCode.NONE, result
    return result.member_epoch


def _classic_join(coord: GroupCoordinator, group: str, member_id: str = "") -> JoinResult:
    request = JoinRequest(
        group, member_id, None, 10_000, 10_000, "consumer", (("range", b""),), "c", "/h", False
    )
    coord.join_group(request, 1, NOW_MS)
    ((_, result),) = coord.take_completions()
    assert isinstance(result, JoinResult)
    return result


def _commit(
    coord: GroupCoordinator, group: str, member: str, epoch: int, *, transactional: bool = False
) -> ErrorCode:
    plan = coord.commit_offsets(
        CommitRequest(group, epoch, member, None, (CommitOffset("t", 0, 5, -1, None),), transactional), NOW_MS
    )
    if plan.error_code == ErrorCode.NONE:
        coord.apply(plan, NOW_MS)
    return plan.partition_errors[("t", 0)]


def test_a_group_id_is_classic_or_consumer() -> None:
    coord = _coordinator()
    _join_consumer(coord, "consumer-group", "m")
    # A classic member joins a consumer group in use only with a consumer protocol subscription (Kafka's
    # classicGroupJoinToConsumerGroup; coordinator/group_migration.py) ...
    assert _classic_join(coord, "consumer-group").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # ... and a KIP-848 member converts a classic group with members only when their subscriptions decode
    # (tests/unit/test_group_migration.py covers the conversions).
    assert _classic_join(coord, "classic-group").error_code == ErrorCode.NONE
    result = coord.consumer_group_heartbeat(
        HeartbeatRequest(
            "classic-group",
            "m",
            0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=("t",),
            topic_partitions=(),
        ),
        TOPICS,
        NOW_MS,
    )
    assert result.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert coord.describe_consumer_group("classic-group").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert coord.describe_consumer_group("nobody").error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_an_empty_group_of_one_kind_gives_its_id_to_the_other() -> None:
    coord = _coordinator()
    _join_consumer(coord, "g", "m")
    coord.consumer_group_heartbeat(HeartbeatRequest("g", "m", -1), TOPICS, NOW_MS)
    assert _classic_join(coord, "g").error_code == ErrorCode.NONE
    assert "g" not in coord.consumer.groups
    # The consumer group's tombstones were queued for __consumer_offsets.
    assert any(value is None for _, records in coord.take_writes() for _, value in records)
    # A classic group with only committed offsets (no members) becomes a consumer group, offsets kept.
    assert _commit(coord, "offsets-only", "", -1) == ErrorCode.NONE
    _join_consumer(coord, "offsets-only", "m")
    assert coord.fetch_offsets("offsets-only", [("t", [0])])[1][0][2] is not None
    listed = coord.list_groups()
    assert all(group_id != "offsets-only" for group_id, _, _ in listed)
    assert ("offsets-only", "Stable") in coord.list_consumer_groups()


def test_offset_commits_check_member_epochs() -> None:
    coord = _coordinator()
    epoch = _join_consumer(coord, "g", "m")
    assert _commit(coord, "g", "m", epoch) == ErrorCode.NONE
    assert _commit(coord, "g", "m", epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert _commit(coord, "g", "other", epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(coord, "g", "", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
    assert _commit(coord, "g", "m", epoch + 1, transactional=True) == ErrorCode.ILLEGAL_GENERATION
    # TxnOffsetCommit v0-2 names no member: accepted while the group has members (issue 27) ...
    assert _commit(coord, "g", "", -1, transactional=True) == ErrorCode.NONE
    # ... but a member it names is validated.
    assert _commit(coord, "g", "other", -1, transactional=True) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(coord, "g", "m", epoch, transactional=True) == ErrorCode.NONE
    assert coord.consumer_offset_fetch_error("g", "m", epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert coord.consumer_offset_fetch_error("g", "x", epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coord.consumer_offset_fetch_error("g", "", -1) == ErrorCode.NONE


def test_describe_groups_shows_a_consumer_group_in_the_classic_shape_and_delete_needs_it_empty() -> None:
    coord = _coordinator()
    _join_consumer(coord, "g", "m")
    d = coord.describe_group("g")
    assert (d.error_code, d.state, d.protocol_type, d.protocol_data) == (
        ErrorCode.NONE,
        "Stable",
        "consumer",
        "uniform",
    )
    (member,) = d.members
    assert subscribed_topics(member.metadata) == {"t"}
    assert assigned_partitions(member.assignment) == [("t", [0, 1, 2, 3])]
    (plan,) = coord.delete_groups(["g"])
    assert plan.group_errors["g"] == ErrorCode.NON_EMPTY_GROUP
    coord.consumer_group_heartbeat(HeartbeatRequest("g", "m", -1), TOPICS, NOW_MS)
    (plan,) = coord.delete_groups(["g"])
    assert plan.group_errors["g"] == ErrorCode.NONE and plan.records
    coord.apply(plan, NOW_MS)
    assert "g" not in coord.consumer.groups


def test_records_through_the_write_path_load_the_group_again() -> None:
    coord = _coordinator()
    for member in ("a", "b"):
        _join_consumer(coord, "g", member)
    writes = coord.take_writes()
    loaded = _coordinator()
    partition = coord.partition_for("g")
    loaded.owned_partitions.discard(partition)
    loaded.begin_load(partition)
    for p, records in writes:
        assert p == partition
        for key, value in records:
            loaded.replay(p, key, value, NOW_MS)
    loaded.finish_load(partition, NOW_MS)
    assert loaded.describe_consumer_group("g") == coord.describe_consumer_group("g")
    # The members keep their epochs: their next heartbeat is accepted by the new coordinator.
    member = coord.consumer.groups["g"].members["a"]
    owned = tuple((t, tuple(sorted(ps))) for t, ps in member.assigned.items())
    result = loaded.consumer_group_heartbeat(
        HeartbeatRequest("g", "a", member.member_epoch, topic_partitions=owned), TOPICS, NOW_MS + 1
    )
    assert result.error_code == ErrorCode.NONE and result.member_epoch == member.member_epoch


def test_offset_delete_refuses_the_topics_a_consumer_group_subscribes_to() -> None:
    coord = _coordinator()
    epoch = _join_consumer(coord, "g", "m")
    assert _commit(coord, "g", "m", epoch) == ErrorCode.NONE
    plan = coord.delete_offsets("g", [("t", [0]), ("other", [0])])
    assert plan.partition_errors == {
        ("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("other", 0): ErrorCode.NONE,
    }
    coord.consumer_group_heartbeat(HeartbeatRequest("g", "m", -1), TOPICS, NOW_MS)
    plan = coord.delete_offsets("g", [("t", [0])])
    assert plan.partition_errors == {("t", 0): ErrorCode.NONE} and plan.records
