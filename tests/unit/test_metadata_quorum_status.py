"""kafka-metadata-quorum describe --status from DescribeQuorum v2 answers, as Kafka 4.3's
MetadataQuorumCommand prints them (issue 33)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pykraft.cli.metadata import QuorumToolError, quorum_status_lines


def _replica(replica_id: int, end: int, caught_up_ms: int) -> SimpleNamespace:
    return SimpleNamespace(
        replica_id=replica_id,
        replica_directory_id=None,
        log_end_offset=end,
        last_caught_up_timestamp=caught_up_ms,
    )


def _response(
    voters: list[SimpleNamespace], observers: list[SimpleNamespace], leader: int
) -> SimpleNamespace:
    partition = SimpleNamespace(
        leader_id=leader, leader_epoch=4, high_watermark=90, current_voters=voters, observers=observers
    )
    listener = SimpleNamespace(name="CONTROLLER", host="127.0.0.1", port=9093)
    nodes = [SimpleNamespace(node_id=1, listeners=[listener])]
    return SimpleNamespace(topics=[SimpleNamespace(partitions=[partition])], nodes=nodes)


def _fields(lines: list[str]) -> dict[str, str]:
    return {name: value.strip() for name, value in (line.split(":", 1) for line in lines)}


def test_status_lines_are_kafkas_lag_from_the_lowest_voter_and_voters_as_json() -> None:
    voters = [_replica(1, 100, 5000), _replica(2, 95, 4200), _replica(3, 100, 5000)]
    fields = _fields(quorum_status_lines(_response(voters, [_replica(101, 99, 4900)], 1), "abc"))
    assert list(fields)[0] == "ClusterId" and fields["ClusterId"] == "abc"
    assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"]) == ("5", "800")
    assert json.loads(fields["CurrentVoters"]) == [
        {"id": 1, "endpoints": ["CONTROLLER://127.0.0.1:9093"]},
        {"id": 2},
        {"id": 3},
    ]
    assert json.loads(fields["CurrentObservers"]) == [{"id": 101}]


def test_a_leader_that_is_the_lowest_has_no_lag_time_and_an_unknown_leader_is_a_one_line_error() -> None:
    fields = _fields(quorum_status_lines(_response([_replica(1, 100, 5000)], [], 1), "abc"))
    assert (fields["MaxFollowerLag"], fields["MaxFollowerLagTimeMs"]) == ("0", "0")
    # A leader that removed itself (KIP-853) is listed among the observers until the removal commits.
    fields = _fields(
        quorum_status_lines(_response([_replica(2, 90, 4000)], [_replica(1, 100, 5000)], 1), "x")
    )
    assert fields["MaxFollowerLag"] == "10"
    with pytest.raises(QuorumToolError, match="leader 7"):
        quorum_status_lines(_response([_replica(1, 100, 5000)], [], 7), "abc")
