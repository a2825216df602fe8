from __future__ import annotations

import pytest

from pykraft.raft.quorum_state import QuorumStateFormatError, decode_quorum_state, encode_quorum_state
from pykraft.raft.state import QuorumState


def test_encode__kafka_layout() -> None:
    state = QuorumState(5, leader_id=1, voters=frozenset({1}))
    assert encode_quorum_state(state) == (
        b'{"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,'
        b'"currentVoters":[{"voterId":1}],"data_version":0}'
    )


def test_round_trip() -> None:
    state = QuorumState(7, voted_id=3, voters=frozenset({1, 2, 3}))
    assert decode_quorum_state(encode_quorum_state(state)) == state


def test_decode__version_1_without_cluster_id_and_null_voters() -> None:
    raw = (
        b'{"leaderId":-1,"leaderEpoch":2,"votedId":2,"appliedOffset":0,"currentVoters":null,"data_version":1}'
    )
    assert decode_quorum_state(raw) == QuorumState(2, voted_id=2)


@pytest.mark.parametrize(
    "raw",
    [b"", b"[]", b"{not json", b'{"leaderEpoch":"5"}', b'{"data_version":7}', b'{"currentVoters":[1]}'],
)
def test_decode__malformed__raises_format_error(raw: bytes) -> None:
    with pytest.raises(QuorumStateFormatError):
        decode_quorum_state(raw)
