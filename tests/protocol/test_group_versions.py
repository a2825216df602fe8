"""Every advertised version of the group APIs, on the wire: join -> sync -> heartbeat -> commit ->
fetch -> describe/list -> leave -> delete, one group per JoinGroup version."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from pykraft.core.errors import ErrorCode
from pykraft.protocol.messages import SUPPORTED_VERSIONS, ApiKey
from pykraft.testing import running_node
from tests.raw_client import RawClient, create_topic

OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def node():  # type: ignore[no-untyped-def]
    with running_node(overrides=OVERRIDES) as running:
        # The topic the group commits offsets for: Kafka refuses a commit for a partition that does not
        # exist (UNKNOWN_TOPIC_OR_PARTITION).
        with RawClient(running.bootstrap_servers) as client:
            create_topic(client, "t", partitions=2)
        yield running


def _v(api: ApiKey, wanted: int) -> int:
    low, high = SUPPORTED_VERSIONS[api]
    return max(low, min(wanted, high))


@pytest.mark.parametrize("join_version", range(SUPPORTED_VERSIONS[ApiKey.JOIN_GROUP][1] + 1))
def test_group_lifecycle_at_every_version(node, join_version: int) -> None:  # type: ignore[no-untyped-def]
    group = f"raw-{join_version}"
    with RawClient(node.bootstrap_servers) as client:
        fc_version = _v(ApiKey.FIND_COORDINATOR, join_version)
        if fc_version >= 4:
            find = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
        else:
            find = FindCoordinatorRequest(key=group, key_type=0)
        found = client.request(find, FindCoordinatorResponse, version=fc_version)
        error = found.coordinators[0].error_code if fc_version >= 4 else found.error_code
        assert error == ErrorCode.NONE

        def join(member_id: str) -> object:
            request = JoinGroupRequest(
                group_id=group,
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"sub")],
            )
            return client.request(request, JoinGroupResponse, version=join_version)

        joined = join("")
        if join_version >= 4:
            assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED
            joined = join(joined.member_id)
        assert joined.error_code == ErrorCode.NONE
        member, generation = joined.member_id, joined.generation_id
        assert joined.leader == member and [m.member_id for m in joined.members] == [member]

        sync_version = _v(ApiKey.SYNC_GROUP, join_version)
        synced = client.request(
            SyncGroupRequest(
                group_id=group,
                generation_id=generation,
                member_id=member,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"A")],
            ),
            SyncGroupResponse,
            version=sync_version,
        )
        assert synced.error_code == ErrorCode.NONE and synced.assignment == b"A"

        beat = client.request(
            HeartbeatRequest(
                group_id=group, generation_id=generation, member_id=member, group_instance_id=None
            ),
            HeartbeatResponse,
            version=_v(ApiKey.HEARTBEAT, join_version),
        )
        assert beat.error_code == ErrorCode.NONE

        commit_version = _v(ApiKey.OFFSET_COMMIT, join_version)
        part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        committed = client.request(
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=generation,
                member_id=member,
                group_instance_id=None,
                retention_time_ms=-1,
                topics=[
                    OffsetCommitRequest.OffsetCommitRequestTopic(
                        name="t",
                        partitions=[
                            part(partition_index=0, committed_offset=41, committed_metadata="m"),
                            part(partition_index=1, committed_offset=7, committed_metadata=None),
                        ],
                    )
                ],
            ),
            OffsetCommitResponse,
            version=commit_version,
        )
        assert [p.error_code for p in committed.topics[0].partitions] == [0, 0]

        fetch_version = _v(ApiKey.OFFSET_FETCH, join_version)
        if fetch_version >= 8:
            fetch = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequest.OffsetFetchRequestGroup(
                        group_id=group,
                        topics=[
                            OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                                name="t", partition_indexes=[0, 1, 2]
                            )
                        ],
                    )
                ],
                require_stable=False,
            )
            fetched = client.request(fetch, OffsetFetchResponse, version=fetch_version)
            partitions = fetched.groups[0].topics[0].partitions
        else:
            fetch = OffsetFetchRequest(
                group_id=group,
                topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 2])],
                require_stable=False,
            )
            fetched = client.request(fetch, OffsetFetchResponse, version=fetch_version)
            partitions = fetched.topics[0].partitions
        assert [p.committed_offset for p in partitions] == [41, 7, -1]
        assert partitions[0].metadata == "m"

        described = client.request(
            DescribeGroupsRequest(groups=[group], include_authorized_operations=False),
            DescribeGroupsResponse,
            version=_v(ApiKey.DESCRIBE_GROUPS, join_version),
        )
        d = described.groups[0]
        assert (d.group_state, d.protocol_data) == ("Stable", "range")
        assert d.members[0].member_assignment == b"A" and d.members[0].client_id == "raw-test"
        listed = client.request(
            ListGroupsRequest(states_filter=[], types_filter=[]),
            ListGroupsResponse,
            version=_v(ApiKey.LIST_GROUPS, join_version),
        )
        assert group in {g.group_id for g in listed.groups}

        delete_version = _v(ApiKey.DELETE_GROUPS, join_version)
        not_empty = client.request(
            DeleteGroupsRequest(groups_names=[group]), DeleteGroupsResponse, delete_version
        )
        assert not_empty.results[0].error_code == ErrorCode.NON_EMPTY_GROUP

        leave_version = _v(ApiKey.LEAVE_GROUP, join_version)
        if leave_version >= 3:
            leave = LeaveGroupRequest(
                group_id=group,
                members=[LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None)],
            )
        else:
            leave = LeaveGroupRequest(group_id=group, member_id=member)
        left = client.request(leave, LeaveGroupResponse, version=leave_version)
        assert left.error_code == ErrorCode.NONE

        offset_delete = client.request(
            OffsetDeleteRequest(
                group_id=group,
                topics=[
                    OffsetDeleteRequest.OffsetDeleteRequestTopic(
                        name="t",
                        partitions=[
                            OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                                partition_index=1
                            )
                        ],
                    )
                ],
            ),
            OffsetDeleteResponse,
            version=0,
        )
        assert offset_delete.error_code == ErrorCode.NONE
        deleted = client.request(
            DeleteGroupsRequest(groups_names=[group, "never"]), DeleteGroupsResponse, delete_version
        )
        assert [r.error_code for r in deleted.results] == [ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND]
        gone = client.request(
            DescribeGroupsRequest(groups=[group], include_authorized_operations=False),
            DescribeGroupsResponse,
            version=_v(ApiKey.DESCRIBE_GROUPS, join_version),
        )
        assert gone.groups[0].group_state == "Dead"
