"""``pykraft reassign-partitions``' pure parts: Kafka's JSON files in and out, and the rack-unaware
placement of --generate (Kafka AdminUtils.assignReplicasToBrokers)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from pykraft.cli.common import UsageError
from pykraft.cli.reassign import (
    assign_replicas_to_brokers,
    assignment_json,
    plan_of,
    throttled_replicas,
    topics_to_move,
)


def test_plans_round_trip_through_kafkas_json() -> None:
    plan = {("t", 1): [3, 1], ("t", 0): [1, 2]}
    text = assignment_json(plan)
    assert json.loads(text) == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
            {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        ],
    }
    assert plan_of(json.loads(text), "plan.json") == plan
    assert topics_to_move({"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]}, "t.json") == ["a", "b"]


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"version": 1}, "expected"),
        ({"partitions": [{"topic": "t", "partition": 0}]}, "each partition is"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "lists a broker twice"),
        (
            {"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2},
            "partition t-0 is listed twice",
        ),
        ({"partitions": []}, "the partition list is empty"),
    ],
)
def test_bad_plans_name_the_file_and_the_problem(document: object, complaint: str) -> None:
    with pytest.raises(UsageError, match=complaint) as excinfo:
        plan_of(document, "plan.json")
    assert "--reassignment-json-file plan.json" in str(excinfo.value)


def test_generated_placement_spreads_replicas_and_leaders_evenly() -> None:
    brokers = [101, 102, 103, 104]
    placement = assign_replicas_to_brokers(brokers, 8, 3, random.Random(3))
    assert all(len(set(replicas)) == 3 for replicas in placement)
    assert Counter(replicas[0] for replicas in placement) == dict.fromkeys(brokers, 2)
    assert Counter(b for replicas in placement for b in replicas) == dict.fromkeys(brokers, 6)


@pytest.mark.parametrize("seed", range(4))
def test_generated_placement_with_racks_puts_each_partitions_replicas_in_different_racks(seed: int) -> None:
    # Ids interleaved with racks: the rack-unaware order would put two replicas in one rack.
    racks = {101: "a", 102: "a", 103: "b", 104: "b", 105: "c", 106: "c"}
    placement = assign_replicas_to_brokers(list(racks), 12, 3, random.Random(seed), racks)
    for replicas in placement:
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b", "c"}
    assert Counter(replicas[0] for replicas in placement) == dict.fromkeys(racks, 2)
    # More replicas than racks: each rack once, then any other broker, never one twice.
    two_racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assign_replicas_to_brokers(list(two_racks), 8, 3, random.Random(seed), two_racks):
        assert len(set(replicas)) == 3 and {two_racks[b] for b in replicas} == {"a", "b"}


def test_throttles_name_the_sending_and_the_fetching_replicas() -> None:
    # Kafka's calculateLeaderThrottles / calculateFollowerThrottles: every current replica of a moved
    # partition is leader-throttled, every new one follower-throttled.
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1]}
    plan = {("t", 0): [1, 3], ("t", 1): [2, 3], ("u", 0): [2]}
    leader, follower = throttled_replicas(plan, current)
    assert leader == {"t": "0:1,0:2,1:2,1:3", "u": "0:1"}
    assert follower == {"t": "0:3", "u": "0:2"}
