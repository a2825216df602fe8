"""KIP-848 online migration between classic and consumer groups (issue 27, coordinator/group_migration.py):
a classic group becomes a consumer group when a consumer-protocol member joins it, per
group.consumer.migration.policy; its classic members go on with JoinGroup/SyncGroup/Heartbeat/LeaveGroup
answered from the consumer group (Kafka's classicGroup*ToConsumerGroup); the group turns classic again when
its last consumer-protocol member leaves; the conversion records rebuild the same group on load."""

from __future__ import annotations

import random
import struct
import uuid

import pytest

from pykraft.coordinator import consumer_group_records as rec
from pykraft.coordinator import group_migration
from pykraft.coordinator.consumer_group import (
    ConsumerGroupConfig,
    HeartbeatRequest,
    MemberState,
    MigrationPolicy,
    TopicInfo,
)
from pykraft.coordinator.group_coordinator import (
    CommitOffset,
    CommitRequest,
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResult,
    LeaveMember,
    SyncRequest,
    SyncResult,
)
from pykraft.coordinator.offsets_records import GroupKey, decode_group_value, decode_key, encode_key
from pykraft.core.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=7)
TOPICS = {"t": TopicInfo(TOPIC_ID, 4)}
NOW_MS = 1_000_000
SESSION_MS = 10_000
REBALANCE_MS = 20_000


def _coordinator(policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> GroupCoordinator:
    coord = GroupCoordinator(
        GroupConfig(
            offsets_topic_num_partitions=4,
            group_initial_rebalance_delay_ms=0,
            group_min_session_timeout_ms=1,
            consumer=ConsumerGroupConfig(migration_policy=policy, assignors=("range", "uniform")),
        ),
        random.Random(5),
    )
    coord.owned_partitions.update(range(4))
    return coord


def _subscription(owned: tuple[int, ...] | list[int] = (), version: int = 1) -> bytes:
    """ConsumerProtocolSubscription of topic "t" with ``owned`` partitions of it (v1+)."""
    out = struct.pack(">hi", version, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    if version >= 1:
        out += struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", len(owned))
        out += b"".join(struct.pack(">i", p) for p in owned)
    if version >= 2:
        out += struct.pack(">i", -1)
    if version >= 3:
        out += struct.pack(">h", -1)
    return out


def _join(
    coord: GroupCoordinator, member_id: str, owned: list[int] | None = None, now_ms: int = NOW_MS
) -> list[tuple[int, JoinResult | SyncResult]]:
    request = JoinRequest(
        "g",
        member_id,
        None,
        SESSION_MS,
        REBALANCE_MS,
        "consumer",
        (("range", _subscription(owned or [])), ("roundrobin", _subscription(owned or []))),
        "client",
        "/127.0.0.1",
        False,
    )
    coord.join_group(request, len(member_id), now_ms, TOPICS)
    return coord.take_completions()


def _sync(
    coord: GroupCoordinator, member_id: str, generation: int, assignments: tuple[tuple[str, bytes], ...] = ()
) -> list[tuple[int, JoinResult | SyncResult]]:
    coord.sync_group(
        SyncRequest("g", generation, member_id, None, "consumer", "range", assignments), 99, NOW_MS
    )
    return coord.take_completions()


def _classic_group(coord: GroupCoordinator) -> tuple[int, str, str]:
    """A stable classic group: member A owns t-0/t-1, B t-2/t-3. Returns its generation and the ids."""
    ((_, first),) = _join(coord, "")
    assert isinstance(first, JoinResult) and first.error_code == ErrorCode.NONE
    a = first.member_id
    _sync(coord, a, first.generation_id, ((a, group_migration.encode_assignment([("t", [0, 1, 2, 3])])),))
    assert _join(coord, "") == []  # A must rejoin
    done = _join(coord, a, [0, 1, 2, 3])
    b = next(m for m in coord.groups["g"].members if m != a)
    generation = next(r.generation_id for _, r in done if isinstance(r, JoinResult))
    assignments = (
        (a, group_migration.encode_assignment([("t", [0, 1])])),
        (b, group_migration.encode_assignment([("t", [2, 3])])),
    )
    _sync(coord, a, generation, assignments)
    _sync(coord, b, generation)
    assert coord.groups["g"].state == GroupState.STABLE
    coord.take_writes()
    return generation, a, b


def _consumer_join(coord: GroupCoordinator, member_id: str = "new"):  # type: ignore[no-untyped-def]
    return coord.consumer_group_heartbeat(
        HeartbeatRequest(
            "g",
            member_id,
            0,
            rebalance_timeout_ms=REBALANCE_MS,
            subscribed_topic_names=("t",),
            topic_partitions=(),
        ),
        TOPICS,
        NOW_MS,
    )


def _owned(coord: GroupCoordinator, member_id: str) -> set[int]:
    return {p for ps in coord.consumer.groups["g"].members[member_id].assigned.values() for p in ps}


def _target(coord: GroupCoordinator, member_id: str) -> set[int]:
    return {p for ps in coord.consumer.groups["g"].target[member_id].values() for p in ps}


def _assigned(assignment: bytes) -> set[int]:
    return {p for _, ps in group_migration.decode_assignment(assignment)[0] for p in ps}


def _reload(
    coord: GroupCoordinator, writes: list[tuple[int, list[tuple[bytes, bytes | None]]]]
) -> GroupCoordinator:
    loaded = _coordinator()
    partition = coord.partition_for("g")
    loaded.owned_partitions.discard(partition)
    loaded.begin_load(partition)
    for p, records in writes:
        for key, value in records:
            loaded.replay(p, key, value, NOW_MS)
    loaded.finish_load(partition, NOW_MS)
    return loaded


def test_a_consumer_protocol_member_joining_a_classic_group_converts_it() -> None:
    coord = _coordinator()
    generation, a, b = _classic_group(coord)
    result = _consumer_join(coord)
    assert result.error_code == ErrorCode.NONE
    group = coord.consumer.groups["g"]
    # ConsumerGroup.fromClassicGroup: the classic members at the classic generation, with their partitions;
    # the joining member bumped the group epoch.
    assert group.group_epoch == generation + 1
    member_a, member_b = group.members[a], group.members[b]
    assert (member_a.member_epoch, member_b.member_epoch) == (generation, generation)
    assert member_a.classic is not None and member_a.classic.session_timeout_ms == SESSION_MS
    assert [name for name, _ in member_a.classic.supported_protocols] == ["range", "roundrobin"]
    assert (_owned(coord, a), _owned(coord, b)) == ({0, 1}, {2, 3})
    # The newcomer waits for partitions the classic members still own (never two owners).
    assert group.members["new"].state == MemberState.UNRELEASED_PARTITIONS and not result.assignment
    # The classic group keeps nothing but its offsets; it is listed as the consumer group it now is.
    assert not coord.groups["g"].members
    assert ("g", "Reconciling") in coord.list_consumer_groups()
    # Records as Kafka's convertToConsumerGroup: the classic group's tombstone first, then the consumer
    # group (member metadata with ClassicMemberMetadata, epoch, targets, current assignments).
    writes = coord.take_writes()
    records = [r for _, rs in writes for r in rs]
    assert records[0] == (encode_key(GroupKey("g")), None)
    classic_meta = [
        rec.decode_member_metadata_value(v)
        for k, v in records
        if rec.key_version(k) == rec.MEMBER_METADATA_KEY and v is not None
    ]
    assert {m.classic_member_metadata is not None for m in classic_meta} == {True, False}
    loaded = _reload(coord, writes)
    assert loaded.describe_consumer_group("g") == coord.describe_consumer_group("g")
    assert loaded.consumer.groups["g"].members[a].classic == member_a.classic
    # The loaded classic members go on heartbeating at their generation (told to rejoin: epoch passed).
    assert loaded.heartbeat("g", generation, a, None, NOW_MS) == ErrorCode.REBALANCE_IN_PROGRESS
    assert "g" not in loaded.list_groups()


def test_the_upgrade_follows_the_policy_and_the_group_protocol() -> None:
    for policy in (MigrationPolicy.DISABLED, MigrationPolicy.DOWNGRADE):
        coord = _coordinator(policy)
        _, a, b = _classic_group(coord)
        result = _consumer_join(coord)
        assert result.error_code == ErrorCode.GROUP_ID_NOT_FOUND, policy
        assert "online upgrade is disabled" in (result.error_message or "")
        assert "g" not in coord.consumer.groups and len(coord.groups["g"].members) == 2
        assert coord.take_writes() == []
    coord = _coordinator(MigrationPolicy.UPGRADE)
    _, a, b = _classic_group(coord)
    # Only a joining member (epoch 0) converts the group.
    stale = coord.consumer_group_heartbeat(HeartbeatRequest("g", "x", 3), TOPICS, NOW_MS)
    assert stale.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert _consumer_join(coord).error_code == ErrorCode.NONE
    # A group of another protocol type (Kafka Connect's "connect") is never converted.
    coord = _coordinator()
    coord.join_group(
        JoinRequest(
            "g", "", None, SESSION_MS, REBALANCE_MS, "connect", (("default", b"x"),), "c", "/h", False
        ),
        1,
        NOW_MS,
    )
    coord.take_completions()
    result = _consumer_join(coord)
    assert result.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "does not use the consumer embedded protocol" in (result.error_message or "")


def test_a_refused_joining_heartbeat_leaves_the_classic_group_as_it_was() -> None:
    coord = GroupCoordinator(
        GroupConfig(
            offsets_topic_num_partitions=4,
            group_initial_rebalance_delay_ms=0,
            group_min_session_timeout_ms=1,
            consumer=ConsumerGroupConfig(max_size=2),
        ),
        random.Random(5),
    )
    coord.owned_partitions.update(range(4))
    _, a, b = _classic_group(coord)
    assert _consumer_join(coord).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "g" not in coord.consumer.groups and len(coord.groups["g"].members) == 2
    assert coord.take_writes() == []


def test_classic_members_inside_a_consumer_group_rejoin_sync_and_heartbeat_from_it() -> None:
    coord = _coordinator()
    generation, a, b = _classic_group(coord)
    _consumer_join(coord)
    group = coord.consumer.groups["g"]
    # Kafka's classicGroupHeartbeatToConsumerGroup: the group epoch passed the member, it must rejoin.
    assert coord.heartbeat("g", generation, a, None, NOW_MS) == ErrorCode.REBALANCE_IN_PROGRESS
    assert coord.heartbeat("g", generation + 5, a, None, NOW_MS) == ErrorCode.ILLEGAL_GENERATION
    assert coord.heartbeat("g", generation, "nobody", None, NOW_MS) == ErrorCode.UNKNOWN_MEMBER_ID
    # A SyncGroup of the old generation is told to rejoin as well (throwIfRebalanceInProgress).
    ((_, stale),) = _sync(coord, a, generation)
    assert isinstance(stale, SyncResult) and stale.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    # An OffsetCommit of a classic member is checked against its member epoch: ILLEGAL_GENERATION.
    commit = CommitRequest("g", generation + 1, a, None, (CommitOffset("t", 0, 5, -1, None),))
    assert coord.commit_offsets(commit, NOW_MS).error_code == ErrorCode.ILLEGAL_GENERATION
    commit = CommitRequest("g", generation, a, None, (CommitOffset("t", 0, 5, -1, None),))
    assert coord.commit_offsets(commit, NOW_MS).error_code == ErrorCode.NONE
    # A classic member the new target takes a partition from rejoins still owning its partitions (a
    # cooperative client): it first revokes (UNREVOKED_PARTITIONS, same epoch), answered at once with no
    # leader (nobody assigns client-side) and the partitions it keeps.
    x = next(m for m in (a, b) if _owned(coord, m) - _target(coord, m))
    kept = _owned(coord, x) & _target(coord, x)
    ((_, joined),) = _join(coord, x, sorted(_owned(coord, x)))
    assert isinstance(joined, JoinResult) and joined.error_code == ErrorCode.NONE
    assert (joined.generation_id, joined.leader, joined.members) == (generation, "", ())
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    assert group.members[x].state == MemberState.UNREVOKED_PARTITIONS
    ((_, synced),) = _sync(coord, x, generation)
    assert isinstance(synced, SyncResult) and synced.error_code == ErrorCode.NONE
    assert _assigned(synced.assignment) == kept
    assert coord.heartbeat("g", generation, x, None, NOW_MS) == ErrorCode.REBALANCE_IN_PROGRESS
    # Revoked: its rejoin moves it to the new epoch.
    ((_, joined),) = _join(coord, x, sorted(kept))
    assert isinstance(joined, JoinResult) and joined.generation_id == group.group_epoch
    assert group.members[x].state != MemberState.UNREVOKED_PARTITIONS
    # Everyone converges: classic members rejoin when told to (eager ones owning nothing), the
    # consumer-protocol member heartbeats; no partition ever has two owners.
    for _ in range(4):
        for m in (a, b):
            member = group.members[m]
            if coord.heartbeat("g", member.member_epoch, m, None, NOW_MS) == ErrorCode.REBALANCE_IN_PROGRESS:
                ((_, joined),) = _join(coord, m, sorted(_owned(coord, m)))
                assert isinstance(joined, JoinResult) and joined.error_code == ErrorCode.NONE
            ((_, synced),) = _sync(coord, m, group.members[m].member_epoch)
            assert isinstance(synced, SyncResult) and synced.error_code == ErrorCode.NONE
            assert _assigned(synced.assignment) == _owned(coord, m)
        new = group.members["new"]
        owned = tuple((t, tuple(sorted(ps))) for t, ps in new.assigned.items())
        result = coord.consumer_group_heartbeat(
            HeartbeatRequest("g", "new", new.member_epoch, topic_partitions=owned), TOPICS, NOW_MS
        )
        assert result.error_code == ErrorCode.NONE
        owners = [_owned(coord, m) for m in (a, b, "new")]
        assert sum(len(o) for o in owners) == len(set().union(*owners))
    assert set().union(*owners) == {0, 1, 2, 3} and group.state().value == "Stable"
    for m in (a, b):
        assert coord.heartbeat("g", group.members[m].member_epoch, m, None, NOW_MS) == ErrorCode.NONE
    # A classic LeaveGroup removes the member (Kafka's classicGroupLeaveToConsumerGroup) and bumps the epoch;
    # a consumer-protocol member may not leave that way.
    epoch = group.group_epoch
    error, results = coord.leave_group("g", [LeaveMember(b, None), LeaveMember("new", None)], NOW_MS)
    assert error == ErrorCode.NONE
    assert [e for _, e in results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert b not in group.members and group.group_epoch == epoch + 1


def test_a_classic_member_joining_a_consumer_group_needs_its_id_and_a_shared_protocol() -> None:
    coord = _coordinator()
    assert _consumer_join(coord, "m").error_code == ErrorCode.NONE
    request = JoinRequest(
        "g", "", None, SESSION_MS, REBALANCE_MS, "consumer", (("range", _subscription()),), "c", "/h"
    )
    coord.join_group(request, 1, NOW_MS, TOPICS)
    ((_, first),) = coord.take_completions()
    assert (
        isinstance(first, JoinResult) and first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    )
    coord.join_group(JoinRequest(**{**_fields(request), "member_id": first.member_id}), 2, NOW_MS, TOPICS)
    ((_, joined),) = coord.take_completions()
    assert isinstance(joined, JoinResult) and joined.error_code == ErrorCode.NONE
    other = JoinRequest(
        "g", "x", None, SESSION_MS, REBALANCE_MS, "consumer", (("sticky", _subscription()),), "c", "/h"
    )
    coord.join_group(other, 3, NOW_MS, TOPICS)
    ((_, refused),) = coord.take_completions()
    assert isinstance(refused, JoinResult) and refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def _fields(request: JoinRequest) -> dict[str, object]:
    return {name: getattr(request, name) for name in JoinRequest.__dataclass_fields__}


def test_the_last_consumer_protocol_member_leaving_converts_the_group_back() -> None:
    coord = _coordinator()
    _, a, b = _classic_group(coord)
    _consumer_join(coord)
    group = coord.consumer.groups["g"]
    epoch = group.group_epoch
    targets = {m: _target(coord, m) for m in (a, b)}
    coord.take_writes()
    result = coord.consumer_group_heartbeat(HeartbeatRequest("g", "new", -1), TOPICS, NOW_MS)
    assert result.error_code == ErrorCode.NONE
    # Kafka's convertToClassicGroup: a classic group at the group epoch, rebalancing, its members the
    # classic ones with their target assignments.
    assert "g" not in coord.consumer.groups
    classic = coord.groups["g"]
    assert classic.state == GroupState.PREPARING_REBALANCE and classic.generation_id == epoch
    assert set(classic.members) == {a, b} and classic.protocol_name == "range"
    assert [name for name, _ in classic.members[a].protocols] == ["range", "roundrobin"]
    assert classic.members[a].session_timeout_ms == SESSION_MS
    writes = coord.take_writes()
    records = [r for _, rs in writes for r in rs]
    # Tombstones of every consumer group record, then the classic group's metadata.
    assert all(v is None for _, v in records[:-1])
    assert {rec.key_version(k) for k, _ in records[:-1]} == set(rec.CONSUMER_GROUP_KEY_VERSIONS) - {
        rec.PARTITION_METADATA_KEY
    } | {rec.PARTITION_METADATA_KEY}
    key, value = records[-1]
    assert decode_key(key) == GroupKey("g") and value is not None
    stored = decode_group_value(value)
    assert stored.generation == epoch and stored.protocol == "range"
    # Each keeps its target; the leaver's partitions wait for the rebalance (ClassicGroup.fromConsumerGroup).
    assert {m.member_id: _assigned(m.assignment) for m in stored.members} == targets
    # The members are told to rejoin; the classic rebalance then runs as usual.
    assert coord.heartbeat("g", epoch, a, None, NOW_MS) in (
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
    )
    # Replaying what was written (upgrade, then downgrade) rebuilds a classic group of the same members.
    loaded = _reload(coord, writes)
    assert "g" not in loaded.consumer.groups and set(loaded.groups["g"].members) == {a, b}
    assert loaded.groups["g"].generation_id == epoch


def test_the_downgrade_follows_the_policy_and_waits_for_the_last_consumer_protocol_member() -> None:
    coord = _coordinator(MigrationPolicy.UPGRADE)
    _, a, b = _classic_group(coord)
    _consumer_join(coord)
    coord.consumer_group_heartbeat(HeartbeatRequest("g", "new", -1), TOPICS, NOW_MS)
    # Upgrade only: the group stays a consumer group of classic members.
    assert set(coord.consumer.groups["g"].members) == {a, b}
    coord = _coordinator()
    _, a, b = _classic_group(coord)
    _consumer_join(coord, "new")
    _consumer_join(coord, "newer")
    coord.consumer_group_heartbeat(HeartbeatRequest("g", "new", -1), TOPICS, NOW_MS)
    assert "g" in coord.consumer.groups  # "newer" still speaks the consumer protocol
    # A member fenced by its session timeout converts the group back as a leaving one does.
    group = coord.consumer.groups["g"]
    for member_id in (a, b):
        group.members[member_id].session_deadline_ms = NOW_MS + 10**9
        group.members[member_id].classic_deadline_ms = None
    coord.tick(group.members["newer"].session_deadline_ms)
    assert "g" not in coord.consumer.groups and set(coord.groups["g"].members) == {a, b}


def test_classic_members_in_a_consumer_group_are_fenced_by_their_own_session_and_sync_timeouts() -> None:
    coord = _coordinator(MigrationPolicy.UPGRADE)
    _, a, b = _classic_group(coord)
    _consumer_join(coord)
    group = coord.consumer.groups["g"]
    # The classic session timeout (from JoinGroup), not group.consumer.session.timeout.ms.
    assert group.members[a].session_deadline_ms == NOW_MS + SESSION_MS
    ((_, joined),) = _join(coord, b, [], now_ms=NOW_MS + 5000)
    assert isinstance(joined, JoinResult)
    # After its JoinGroup the member must sync within its rebalance timeout.
    assert group.members[b].classic_deadline_ms == NOW_MS + 5000 + REBALANCE_MS
    coord.tick(NOW_MS + SESSION_MS)
    assert a not in group.members  # silent past its session
    assert b in group.members
    # Heartbeats keep its session, not its sync deadline.
    coord.heartbeat("g", joined.generation_id, b, None, NOW_MS + 20_000)
    coord.tick(NOW_MS + 5000 + REBALANCE_MS)
    assert b not in group.members  # never synced


@pytest.mark.parametrize(
    "classic", [None, rec.ClassicMemberMetadata(6000, (("range", b"\x00\x01"), ("rr", b"")))]
)
def test_member_metadata_records_carry_classic_member_metadata_as_tag_0(
    classic: rec.ClassicMemberMetadata | None,
) -> None:
    value = rec.MemberMetadataValue("i", None, "c", "/h", ("t",), None, 5000, None, classic)
    encoded = rec.encode_member_metadata_value(value)
    assert rec.decode_member_metadata_value(encoded) == value
    if classic is not None:
        # Kafka's layout: one tagged field, tag 0, its size, then a nullable struct: presence varint 1,
        # SessionTimeoutMs, SupportedProtocols, the struct's own (empty) tagged fields.
        plain = rec.encode_member_metadata_value(
            rec.MemberMetadataValue("i", None, "c", "/h", ("t",), None, 5000, None)
        )
        head, tagged = encoded[: len(plain) - 1], encoded[len(plain) - 1 :]
        assert head == plain[:-1]
        body = (
            b"\x01"
            + struct.pack(">i", 6000)
            + b"\x03"
            + b"\x06range\x03\x00\x01\x00"
            + b"\x03rr\x01\x00"
            + b"\x00"
        )
        assert tagged == b"\x01\x00" + bytes([len(body)]) + body


def test_consumer_protocol_subscriptions_of_every_version_decode() -> None:
    for version in range(4):
        s = group_migration.decode_subscription(_subscription([2, 3], version))
        assert (s.version, s.topics) == (version, ("t",))
        assert s.owned_partitions == ((("t", (2, 3)),) if version >= 1 else ())


def test_static_members_swap_protocols_in_place_and_the_group_follows() -> None:
    coord = _coordinator()

    def classic_static(instance_id: str) -> JoinResult:
        request = JoinRequest(
            "g",
            "",
            instance_id,
            SESSION_MS,
            REBALANCE_MS,
            "consumer",
            (("range", _subscription()),),
            "client",
            "/h",
        )
        coord.join_group(request, 1, NOW_MS, TOPICS)
        ((_, result),) = coord.take_completions()
        assert isinstance(result, JoinResult) and result.error_code == ErrorCode.NONE, result
        return result

    def consumer_static(instance_id: str, member_id: str) -> None:
        result = coord.consumer_group_heartbeat(
            HeartbeatRequest(
                "g",
                member_id,
                0,
                instance_id=instance_id,
                rebalance_timeout_ms=REBALANCE_MS,
                subscribed_topic_names=("t",),
                topic_partitions=(),
            ),
            TOPICS,
            NOW_MS,
        )
        assert result.error_code == ErrorCode.NONE, result

    consumer_static("i1", "c1")
    classic_static("i2")
    # A classic instance takes the place of the last consumer-protocol one (Kafka's
    # validateOnlineDowngradeWithReplacedMemberId): the group is classic again, stable, no rebalance.
    joined = classic_static("i1")
    assert "g" not in coord.consumer.groups
    classic = coord.groups["g"]
    assert classic.state == GroupState.STABLE and set(classic.static_members) == {"i1", "i2"}
    assert joined.member_id in classic.members and "c1" not in classic.members
    coord.sync_group(
        SyncRequest("g", joined.generation_id, joined.member_id, "i1", "consumer", "range", ()), 2, NOW_MS
    )
    ((_, synced),) = coord.take_completions()
    assert isinstance(synced, SyncResult) and synced.error_code == ErrorCode.NONE
    # And back: a consumer-protocol instance converts the group and takes the classic instance's place at
    # once (a classic static member never sends the -2 epoch, so it is not UNRELEASED_INSTANCE_ID).
    consumer_static("i2", "c2")
    group = coord.consumer.groups["g"]
    assert group.members[group.static_members["i2"]].member_id == "c2"
    assert group.members["c2"].classic is None and len(group.members) == 2


def test_members_waiting_in_a_classic_rebalance_are_told_to_rejoin_the_converted_group() -> None:
    coord = _coordinator()
    ((_, first),) = _join(coord, "")
    assert isinstance(first, JoinResult)
    a = first.member_id
    _sync(coord, a, first.generation_id, ((a, group_migration.encode_assignment([("t", [0, 1, 2, 3])])),))
    assert _join(coord, "") == []  # B waits in JoinGroup for A to rejoin (PreparingRebalance)
    assert coord.groups["g"].state == GroupState.PREPARING_REBALANCE
    assert _consumer_join(coord).error_code == ErrorCode.NONE
    ((_, told),) = coord.take_completions()
    assert isinstance(told, JoinResult) and told.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    # B rejoins the consumer group under its id; A keeps what it owned until it rejoins.
    group = coord.consumer.groups["g"]
    assert _owned(coord, a) == {0, 1, 2, 3} and _owned(coord, told.member_id) == set()
    ((_, joined),) = _join(coord, told.member_id)
    assert isinstance(joined, JoinResult) and joined.error_code == ErrorCode.NONE
    assert joined.generation_id == group.members[told.member_id].member_epoch
