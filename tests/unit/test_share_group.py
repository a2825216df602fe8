"""Share group membership (KIP-932, coordinator/share_group.py) inside the group coordinator: member
epochs, the simple assignor giving every member every subscribed partition, fencing, leaving and
session expiry, group.share.max.size, and a group id being one type only."""

from __future__ import annotations

import random
import uuid

from pykraft.coordinator.consumer_group import HeartbeatRequest, TopicInfo
from pykraft.coordinator.group_coordinator import GroupConfig, GroupCoordinator, JoinRequest, JoinResult
from pykraft.coordinator.share_group import ShareGroupConfig, ShareHeartbeatRequest, ShareHeartbeatResult
from pykraft.core.errors import ErrorCode

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"t": TopicInfo(T1, 3), "u": TopicInfo(T2, 1)}
NOW_MS = 1_000_000


def _coordinator(max_size: int = 200) -> GroupCoordinator:
    coord = GroupCoordinator(
        GroupConfig(
            offsets_topic_num_partitions=4,
            group_initial_rebalance_delay_ms=0,
            group_min_session_timeout_ms=1,
            share=ShareGroupConfig(session_timeout_ms=45_000, heartbeat_interval_ms=5_000, max_size=max_size),
        ),
        random.Random(3),
    )
    coord.owned_partitions.update(range(4))
    return coord


def _heartbeat(
    coord: GroupCoordinator,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None = ("t",),
    group: str = "sg",
    now_ms: int = NOW_MS,
) -> ShareHeartbeatResult:
    return coord.share_group_heartbeat(
        ShareHeartbeatRequest(
            group, member, epoch, subscribed_topic_names=topics, client_id="c", client_host="/h"
        ),
        TOPICS,
        now_ms,
    )


def test_every_member_gets_every_partition_of_its_subscription():
    coord = _coordinator()
    a = _heartbeat(coord, "a", 0)
    assert a.error_code == ErrorCode.NONE and a.member_id == "a"
    assert a.member_epoch == 1 and a.heartbeat_interval_ms == 5_000
    assert a.assignment == {T1: frozenset({0, 1, 2})}
    b = _heartbeat(coord, "b", 0, ("t", "u"))
    assert b.member_epoch == 2
    assert b.assignment == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    # a keeps its partitions: the next heartbeat moves it to the new epoch without an assignment.
    again = _heartbeat(coord, "a", 1, None)
    assert (again.error_code, again.member_epoch, again.assignment) == (ErrorCode.NONE, 2, None)
    d = coord.describe_share_group("sg")
    assert d.state == "Stable" and d.group_epoch == 2 and d.assignor_name == "simple"
    assert {m.member_id for m in d.members} == {"a", "b"}


def test_a_member_id_is_made_when_the_client_sends_none():
    coord = _coordinator()
    result = _heartbeat(coord, "", 0)
    assert result.error_code == ErrorCode.NONE and result.member_id and len(result.member_id) == 22


def test_epochs_are_checked_and_unknown_members_refused():
    coord = _coordinator()
    _heartbeat(coord, "a", 0)
    assert _heartbeat(coord, "a", 7, None).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert _heartbeat(coord, "x", 1, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert _heartbeat(coord, "a", 0, None).error_code == ErrorCode.INVALID_REQUEST  # join without topics
    assert _heartbeat(coord, "a", -2, None).error_code == ErrorCode.INVALID_REQUEST
    assert _heartbeat(coord, "a", 1, None, group="").error_code == ErrorCode.INVALID_GROUP_ID


def test_expiring_members_are_reported_departed_leaving_ones_not():
    coord = _coordinator()
    _heartbeat(coord, "a", 0)
    _heartbeat(coord, "b", 0)
    left = _heartbeat(coord, "a", -1, None)
    assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)
    assert coord.share.take_departed() == []  # it closes its share sessions itself
    assert coord.next_deadline_ms() == NOW_MS + 45_000
    coord.tick(NOW_MS + 44_999)
    assert coord.share.take_departed() == []
    coord.tick(NOW_MS + 45_000)
    assert coord.share.take_departed() == [("sg", "b")]
    assert coord.describe_share_group("sg").state == "Empty"
    assert coord.list_share_groups() == [("sg", "Empty")]


def test_the_group_configs_set_session_and_heartbeat():
    coord = _coordinator()
    coord.share.set_group_configs(
        {"sg": {"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "6000"}}
    )
    assert _heartbeat(coord, "a", 0).heartbeat_interval_ms == 6000
    assert coord.next_deadline_ms() == NOW_MS + 50_000


def test_group_max_size():
    coord = _coordinator(max_size=1)
    _heartbeat(coord, "a", 0)
    assert _heartbeat(coord, "b", 0).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_group_id_is_one_type():
    coord = _coordinator()
    _heartbeat(coord, "a", 0, group="shared")
    join = JoinRequest("shared", "", None, 10_000, 10_000, "consumer", (("range", b""),), "c", "/h", False)
    coord.join_group(join, 1, NOW_MS)
    ((_, result),) = coord.take_completions()
    assert isinstance(result, JoinResult) and result.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    consumer = coord.consumer_group_heartbeat(
        HeartbeatRequest(
            "shared", "c1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), topic_partitions=()
        ),
        TOPICS,
        NOW_MS,
    )
    assert consumer.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # The other way round: a consumer group's id is not a share group.
    coord.consumer_group_heartbeat(
        HeartbeatRequest(
            "cg", "c1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), topic_partitions=()
        ),
        TOPICS,
        NOW_MS,
    )
    assert _heartbeat(coord, "a", 0, group="cg").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert coord.describe_share_group("cg").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # ListGroups types.
    assert ("shared", "Stable") in coord.list_share_groups()
    assert all(g[0] != "shared" for g in coord.list_groups())


def test_not_the_coordinator():
    coord = _coordinator()
    coord.owned_partitions.clear()
    assert _heartbeat(coord, "a", 0).error_code == ErrorCode.NOT_COORDINATOR


def test_the_group_is_kept_as_share_group_records_and_loaded_by_a_new_coordinator():
    coord = _coordinator()
    _heartbeat(coord, "a", 0)
    _heartbeat(coord, "b", 0, ("t", "u"))
    _heartbeat(coord, "c", 0)
    _heartbeat(coord, "c", -1, None)  # left: its records' tombstones follow
    writes = coord.take_writes()
    versions = {int.from_bytes(key[:2], "big") for _, records in writes for key, _ in records}
    assert versions == {10, 11, 14, 15}  # member metadata, group epoch, current assignment, state topics
    loaded = _coordinator()
    partition = coord.partition_for("sg")
    loaded.begin_load(partition)
    for _, records in writes:
        for key, value in records:
            loaded.replay(partition, key, value, NOW_MS + 1)
    loaded.finish_load(partition, NOW_MS + 1)
    before, after = coord.describe_share_group("sg"), loaded.describe_share_group("sg")
    assert after.group_epoch == before.group_epoch and after.state == "Stable"
    assert {
        (m.member_id, m.member_epoch, m.subscribed_topic_names, frozenset(m.assignment.items()))
        for m in after.members
    } == {
        (m.member_id, m.member_epoch, m.subscribed_topic_names, frozenset(m.assignment.items()))
        for m in before.members
    }
    # Its members carry on with their epochs at the new coordinator.
    b = next(m for m in after.members if m.member_id == "b")
    assert _heartbeat(loaded, "b", b.member_epoch, None).error_code == ErrorCode.NONE
    # Deleting the empty group writes every record's tombstone.
    for member, epoch in (("a", -1), ("b", -1)):
        _heartbeat(loaded, member, epoch, None)
    loaded.take_writes()
    assert loaded.delete_groups(["sg"])[0].group_errors == {"sg": ErrorCode.NONE}
    tombstones = [value for _, records in loaded.take_writes() for _, value in records]
    assert tombstones and all(value is None for value in tombstones)
