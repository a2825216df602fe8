"""Codec for Kafka's ``quorum-state`` file (QuorumStateData.json, FileQuorumStateStore), bytes in/out.

The file is one JSON object, written by Jackson without spaces::

    {"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1}],"data_version":0}

Version 0 carries ``clusterId`` (always ``""`` in Kafka) and ``currentVoters``; version 1 drops
``clusterId`` and may have ``currentVoters`` null (KIP-853 keeps voters in the log). Both decode.
The shell writes it atomically (temp file, fsync, rename); this module never touches a file.
"""

from __future__ import annotations

import json
from typing import Any

from pykraft.raft.messages import UNKNOWN_ID
from pykraft.raft.state import QuorumState

DATA_VERSION = 0
SUPPORTED_DATA_VERSIONS = frozenset({0, 1})


class QuorumStateFormatError(ValueError):
    """The quorum-state file does not parse; the message names the field and the value found."""


def encode_quorum_state(state: QuorumState) -> bytes:
    data = {
        "clusterId": "",
        "leaderId": state.leader_id,
        "leaderEpoch": state.leader_epoch,
        "votedId": state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": voter_id} for voter_id in sorted(state.voters)],
        "data_version": DATA_VERSION,
    }
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


def _int_field(data: dict[str, Any], name: str, default: int) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuorumStateFormatError(f"quorum-state field {name!r} must be an integer, got {value!r}")
    return value


def decode_quorum_state(raw: bytes) -> QuorumState:
    """Parse the file; raises ``QuorumStateFormatError`` naming what is wrong."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise QuorumStateFormatError(f"quorum-state is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise QuorumStateFormatError(f"quorum-state must be a JSON object, got {type(data).__name__}")
    version = _int_field(data, "data_version", DATA_VERSION)
    if version not in SUPPORTED_DATA_VERSIONS:
        raise QuorumStateFormatError(f"quorum-state data_version {version} is not supported (0 or 1)")
    leader_epoch = _int_field(data, "leaderEpoch", -1)
    leader_id = _int_field(data, "leaderId", UNKNOWN_ID)
    voted_id = _int_field(data, "votedId", UNKNOWN_ID)
    voters = _decode_voters(data.get("currentVoters"))
    # QuorumStateData's default epoch is -1: a file from before any election means epoch 0 here.
    state = QuorumState(max(leader_epoch, 0), leader_id, voted_id, voters)
    return state


def _decode_voters(value: Any) -> frozenset[int]:
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise QuorumStateFormatError(f"quorum-state currentVoters must be a list, got {value!r}")
    voters: set[int] = set()
    for item in value:
        if not isinstance(item, dict):
            raise QuorumStateFormatError(f"quorum-state voter must be an object, got {item!r}")
        voters.add(_int_field(item, "voterId", UNKNOWN_ID))
    return frozenset(voters)
