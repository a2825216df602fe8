"""``pykraft reassign-partitions``, shaped like kafka-reassign-partitions.sh (KIP-455), with Kafka's JSON:

    pykraft reassign-partitions --bootstrap-server H:P --generate \\
        --topics-to-move-json-file topics.json --broker-list 101,102,103,104
    pykraft reassign-partitions --bootstrap-server H:P --execute --reassignment-json-file plan.json
    pykraft reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file plan.json
    pykraft reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file plan.json

``topics.json`` is ``{"version": 1, "topics": [{"topic": "t"}]}``; a plan is ``{"version": 1,
"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}``.
``--generate`` prints the current assignment and a proposed one placing every partition of those topics
over the brokers listed, as Kafka's AdminUtils.assignReplicasToBrokers does (rack-aware when the
brokers have a ``broker.rack``, unless ``--disable-rack-aware``), with the partitions' current
replication factor. ``--execute`` prints the current assignment (to roll back
with) and sends AlterPartitionReassignments; it refuses while other reassignments are in progress
unless ``--additional``; with ``--throttle BYTES`` it first sets, as Kafka's tool does, the
replication throttle rates (bytes/s) on every broker of the moved partitions (old and new replicas) and
the topics' ``leader.replication.throttled.replicas`` (the current replicas, which send) and
``follower.replication.throttled.replicas`` (the new ones, which fetch). ``--verify`` says for each
partition whether its move completed and, once all have, clears the throttles: the rates on every
broker and the throttled-replicas configs of the plan's topics (unless ``--preserve-throttles``).
``--cancel`` cancels the plan's partitions' reassignments, which restores their original replicas.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from pykraft.cli.common import (
    ToolError,
    UsageError,
    add_connection_arguments,
    admin_security,
    error_name,
    metadata,
    run_tool,
)
from pykraft.cli.configs import alter as alter_configs
from pykraft.controller.replica_placer import rack_alternated
from pykraft.core.topic_configs import (
    FOLLOWER_REPLICATION_THROTTLED_RATE,
    LEADER_REPLICATION_THROTTLED_RATE,
)
from pykraft.io.kafka_connection import BrokerConnection

ALTER_VERSION = 0
LIST_VERSION = 0
TIMEOUT_MS = 60_000
CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_BROKER = 4
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
# Kafka's tool clears this one too (intra-broker moves' throttle); pykraft deletes it as Kafka does.
REPLICA_ALTER_LOG_DIRS_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"

Assignment = dict[tuple[str, int], list[int]]


def _read_json(path: str, flag: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} {path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def topics_to_move(document: Any, path: str) -> list[str]:
    """The topic names of a --topics-to-move-json-file (Kafka's parseTopicsData, version 1)."""
    if not isinstance(document, dict) or not isinstance(document.get("topics"), list):
        raise UsageError(f'--topics-to-move-json-file {path}: expected {{"version": 1, "topics": [...]}}')
    names = []
    for entry in document["topics"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise UsageError(f'--topics-to-move-json-file {path}: each topic is {{"topic": NAME}}')
        names.append(entry["topic"])
    return names


def plan_of(document: Any, path: str) -> Assignment:
    """A --reassignment-json-file as (topic, partition) -> replicas (Kafka's parsePartitionReassignmentData)."""
    if not isinstance(document, dict) or not isinstance(document.get("partitions"), list):
        raise UsageError(f'--reassignment-json-file {path}: expected {{"version": 1, "partitions": [...]}}')
    plan: Assignment = {}
    for entry in document["partitions"]:
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("topic"), str)
            and isinstance(entry.get("partition"), int)
            and isinstance(entry.get("replicas"), list)
            and all(isinstance(r, int) for r in entry["replicas"])
        )
        if not ok:
            raise UsageError(
                f"--reassignment-json-file {path}: each partition is "
                '{"topic": NAME, "partition": N, "replicas": [ids]}'
            )
        key = (entry["topic"], entry["partition"])
        if key in plan:
            raise UsageError(f"--reassignment-json-file {path}: partition {key[0]}-{key[1]} is listed twice")
        if len(set(entry["replicas"])) != len(entry["replicas"]):
            raise UsageError(f"--reassignment-json-file {path}: {key[0]}-{key[1]} lists a broker twice")
        plan[key] = list(entry["replicas"])
    if not plan:
        raise UsageError(f"--reassignment-json-file {path}: the partition list is empty")
    return plan


def assignment_json(assignment: Assignment) -> str:
    """Kafka's formatAsReassignmentJson."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for (t, p), r in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def assign_replicas_to_brokers(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    rng: random.Random,
    racks: Mapping[int, str] | None = None,
) -> list[list[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokers: the first replicas round-robin from a random start,
    the others shifted so that no two partitions repeat the same followers pattern. With ``racks``
    (every broker's rack) it is assignReplicasToBrokersRackAware: the brokers in rack-alternated order,
    and a follower is skipped while its rack (or itself) already holds a replica and some rack (broker)
    holds none."""
    n = len(brokers)
    if replication_factor > n:
        raise ToolError(f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    arranged = rack_alternated(brokers, racks) if racks else list(brokers)
    rack_count = len(set(racks.values())) if racks else 1
    start_index = rng.randrange(n)
    next_replica_shift = rng.randrange(n)
    result = []
    for partition in range(partitions):
        if partition > 0 and partition % n == 0:
            next_replica_shift += 1
        first = (partition + start_index) % n
        replicas = [arranged[first]]
        if not racks:
            for j in range(replication_factor - 1):
                shift = 1 + (next_replica_shift + j) % (n - 1)
                replicas.append(arranged[(first + shift) % n])
            result.append(replicas)
            continue
        racks_used = {racks[arranged[first]]}
        k = 0
        while len(replicas) < replication_factor:
            broker = arranged[(first + 1 + (next_replica_shift * rack_count + k) % (n - 1)) % n]
            k += 1
            if (racks[broker] not in racks_used or len(racks_used) == rack_count) and (
                broker not in replicas or len(replicas) == n
            ):
                replicas.append(broker)
                racks_used.add(racks[broker])
        result.append(replicas)
    return result


def broker_racks(conn: BrokerConnection, brokers: Sequence[int], rack_aware: bool) -> dict[int, str] | None:
    """The listed brokers' racks for a rack-aware --generate (Kafka's getBrokerMetadata): None when rack
    awareness is off or no broker has a rack; some brokers without one is an error, as in Kafka."""
    if not rack_aware:
        return None
    known = {b.node_id: b.rack for b in metadata(conn, []).brokers}
    racks = {b: known.get(b) for b in brokers}
    with_rack = {b: rack for b, rack in racks.items() if rack}
    if not with_rack:
        return None
    if len(with_rack) != len(racks):
        raise ToolError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
            "replica assignment without rack information."
        )
    return with_rack


def current_assignment(conn: BrokerConnection, topics: list[str]) -> Assignment:
    meta = metadata(conn, topics)
    current: Assignment = {}
    for topic in meta.topics:
        if topic.error_code:
            raise ToolError(f"topic {topic.name}: {error_name(topic.error_code)}")
        for p in topic.partitions:
            current[(topic.name, p.partition_index)] = list(p.replica_nodes)
    return current


def ongoing(conn: BrokerConnection) -> dict[tuple[str, int], Any]:
    response = conn.request(
        ListPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=None),
        ListPartitionReassignmentsResponse,
        LIST_VERSION,
    )
    if response.error_code:
        raise ToolError(f"list reassignments: {error_name(response.error_code)}: {response.error_message}")
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def alter(conn: BrokerConnection, targets: dict[tuple[str, int], list[int] | None]) -> list[str]:
    """AlterPartitionReassignments; the partitions it refused, as ``t-p: ERROR: message``."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), replicas in sorted(targets.items()):
        by_topic.setdefault(topic, []).append(
            AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                partition_index=partition, replicas=replicas
            )
        )
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=TIMEOUT_MS,
        allow_replication_factor_change=True,
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(name=name, partitions=parts)
            for name, parts in by_topic.items()
        ],
    )
    response = conn.request(request, AlterPartitionReassignmentsResponse, ALTER_VERSION)
    if response.error_code:
        raise ToolError(f"{error_name(response.error_code)}: {response.error_message}")
    return [
        f"{t.name}-{p.partition_index}: {error_name(p.error_code)}: {p.error_message}"
        for t in response.responses
        for p in t.partitions
        if p.error_code
    ]


def throttled_replicas(plan: Assignment, current: Assignment) -> tuple[dict[str, str], dict[str, str]]:
    """Kafka's calculateLeaderThrottles / calculateFollowerThrottles: per topic, ``partition:broker``
    for every current replica of a moved partition (they send) and for every new one (it fetches)."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    for (topic, partition), target in plan.items():
        sources = current[(topic, partition)]
        leader.setdefault(topic, set()).update((partition, b) for b in sources)
        follower.setdefault(topic, set()).update((partition, b) for b in target if b not in sources)

    def joined(pairs: dict[str, set[tuple[int, int]]]) -> dict[str, str]:
        return {t: ",".join(f"{p}:{b}" for p, b in sorted(ps)) for t, ps in pairs.items()}

    return joined(leader), joined(follower)


def _names(keys: Sequence[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


def _connect(args: argparse.Namespace) -> BrokerConnection:
    return BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-reassign-partitions", security=admin_security(args)
    )


def _generate(args: argparse.Namespace) -> int:
    if not args.topics_to_move_json_file or not args.broker_list:
        raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
    topics = topics_to_move(
        _read_json(args.topics_to_move_json_file, "--topics-to-move-json-file"), args.topics_to_move_json_file
    )
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except ValueError:
        raise UsageError(
            f"--broker-list {args.broker_list!r}: a comma-separated list of broker ids"
        ) from None
    if len(set(brokers)) != len(brokers) or not brokers:
        raise UsageError(f"--broker-list {args.broker_list!r}: each broker once")
    with _connect(args) as conn:
        current = current_assignment(conn, topics)
        racks = broker_racks(conn, brokers, not args.disable_rack_aware)
    rng = random.Random()
    proposed: Assignment = {}
    for topic in dict.fromkeys(topics):
        indexes = sorted(p for t, p in current if t == topic)
        replication_factor = len(current[(topic, indexes[0])])
        for index, replicas in zip(
            indexes,
            assign_replicas_to_brokers(brokers, len(indexes), replication_factor, rng, racks),
            strict=True,
        ):
            proposed[(topic, index)] = replicas
    print("Current partition replica assignment")
    print(assignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(assignment_json(proposed))
    return 0


def _plan(args: argparse.Namespace) -> Assignment:
    if not args.reassignment_json_file:
        raise UsageError("--execute, --verify and --cancel need --reassignment-json-file")
    return plan_of(
        _read_json(args.reassignment_json_file, "--reassignment-json-file"), args.reassignment_json_file
    )


def _execute(args: argparse.Namespace) -> int:
    plan = _plan(args)
    with _connect(args) as conn:
        in_progress = ongoing(conn)
        if in_progress and not args.additional:
            raise ToolError(
                "Cannot execute because there is an existing partition assignment. Use --additional to "
                "override this and create a new partition assignment in addition to the existing one."
            )
        current = current_assignment(conn, sorted({t for t, _ in plan}))
        missing = [key for key in plan if key not in current]
        if missing:
            raise ToolError(f"Topic-partitions not found: {_names(missing)}")
        print("Current partition replica assignment")
        print()
        print(assignment_json({key: current[key] for key in plan}))
        print()
        print("Save this to use as the --reassignment-json-file option during rollback")
        if args.throttle is not None:
            if args.throttle < 0:
                raise UsageError(f"--throttle {args.throttle}: a rate in bytes/s, at least 0")
            _set_throttles(conn, plan, current, args.throttle)
        refused = alter(conn, dict(plan))
    if refused:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(refused))
    print(f"Successfully started partition reassignments for {_names(list(plan))}")
    return 0


def _set_throttles(conn: BrokerConnection, plan: Assignment, current: Assignment, rate: int) -> None:
    """ReassignPartitionsCommand.modifyTopicThrottles and modifyBrokerThrottles."""
    leader, follower = throttled_replicas(plan, current)
    for topic in sorted(leader):
        alter_configs(
            conn,
            CONFIG_RESOURCE_TOPIC,
            topic,
            {LEADER_THROTTLED_REPLICAS: leader[topic], FOLLOWER_THROTTLED_REPLICAS: follower.get(topic, "")},
            [],
        )
    brokers = sorted({b for key, target in plan.items() for b in (*current[key], *target)})
    rates = {LEADER_REPLICATION_THROTTLED_RATE: str(rate), FOLLOWER_REPLICATION_THROTTLED_RATE: str(rate)}
    for broker in brokers:
        alter_configs(conn, CONFIG_RESOURCE_BROKER, str(broker), rates, [])
    print(
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed."
    )
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def _clear_throttles(conn: BrokerConnection, topics: list[str]) -> None:
    """ReassignPartitionsCommand.clearAllThrottles: the rates on every broker, the topics' lists."""
    brokers = sorted(b.node_id for b in metadata(conn, []).brokers)
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    rates = [
        LEADER_REPLICATION_THROTTLED_RATE,
        FOLLOWER_REPLICATION_THROTTLED_RATE,
        REPLICA_ALTER_LOG_DIRS_THROTTLE,
    ]
    for broker in brokers:
        alter_configs(conn, CONFIG_RESOURCE_BROKER, str(broker), {}, rates)
    print(f"Clearing topic-level throttles on topic(s) {','.join(topics)}")
    for topic in topics:
        alter_configs(
            conn, CONFIG_RESOURCE_TOPIC, topic, {}, [LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS]
        )


def _verify(args: argparse.Namespace) -> int:
    plan = _plan(args)
    topics = sorted({t for t, _ in plan})
    with _connect(args) as conn:
        in_progress = ongoing(conn)
        current = current_assignment(conn, topics)
        print("Status of partition reassignment:")
        for key, target in sorted(plan.items()):
            name = f"{key[0]}-{key[1]}"
            if key in in_progress:
                print(f"Reassignment of partition {name} is still in progress.")
            elif current.get(key) == target:
                print(f"Reassignment of partition {name} is completed.")
            else:
                print(
                    f"There is no active reassignment of partition {name}, but replica set is {current.get(key)} rather than {target}."
                )
        # Kafka's verifyAssignment clears the throttles once none of the plan's moves is in progress.
        if not any(key in in_progress for key in plan) and not args.preserve_throttles:
            _clear_throttles(conn, topics)
    return 0


def _cancel(args: argparse.Namespace) -> int:
    plan = _plan(args)
    with _connect(args) as conn:
        refused = alter(conn, dict.fromkeys(plan))
    if refused:
        raise ToolError("Error cancelling partition reassignment(s):\n" + "\n".join(refused))
    print(f"Successfully cancelled partition reassignments for: {_names(list(plan))}")
    return 0


def _run(args: argparse.Namespace) -> int:
    actions = [name for name in ("generate", "execute", "verify", "cancel") if getattr(args, name)]
    if len(actions) != 1:
        raise UsageError("name exactly one of --generate, --execute, --verify, --cancel")
    return {"generate": _generate, "execute": _execute, "verify": _verify, "cancel": _cancel}[actions[0]](
        args
    )


def add_subcommands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reassign-partitions", help="move partitions between brokers (kafka-reassign-partitions, KIP-455)"
    )
    add_connection_arguments(parser)
    for action, text in (
        ("generate", "propose moving the topics of --topics-to-move-json-file onto --broker-list"),
        ("execute", "start the reassignment of --reassignment-json-file"),
        ("verify", "whether the reassignment of --reassignment-json-file completed"),
        ("cancel", "cancel the reassignment of --reassignment-json-file"),
    ):
        parser.add_argument(f"--{action}", action="store_true", help=text)
    parser.add_argument("--topics-to-move-json-file", metavar="FILE")
    parser.add_argument("--broker-list", metavar="ID,ID,...")
    parser.add_argument("--reassignment-json-file", metavar="FILE")
    parser.add_argument(
        "--additional", action="store_true", help="with --execute: while other reassignments are in progress"
    )
    parser.add_argument(
        "--disable-rack-aware", action="store_true", help="with --generate: ignore the brokers' racks"
    )
    parser.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES",
        help="with --execute: the replication rate (bytes/s) the moves may take; --verify removes it",
    )
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="with --verify: leave the throttles in place after the reassignment completed",
    )
    parser.set_defaults(func=run_tool("reassign-partitions", _run))
