"""``pykraft metadata dump (--snapshot FILE | --log DIR) [--json]`` and ``pykraft metadata image --dir DIR``.

A metadata log/snapshot inspector (kafka-dump-log ``--cluster-metadata-decoder`` and the metadata
shell, in one small tool). It reads Kafka's own files: segments ``<base offset>.log`` of
``__cluster_metadata-0`` and ``<end offset>-<epoch>.checkpoint`` snapshots, RecordBatch v2 (compressed
batches too), records framed as KRaft frames them, control records shown as well. Records pykraft
does not model (e.g. RegisterControllerRecord from Kafka) are printed by api key and version with
their raw bytes, never a crash. Errors are one line on stderr naming the file; exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from pykraft.core.errors import ErrorCode
from pykraft.core.uuid import uuid_to_str
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    RECORD_TYPES_BY_API_KEY,
    MetadataRecordError,
    MetadataReplayError,
    decode_metadata_record,
)
from pykraft.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse
from pykraft.protocol.records import control_type_of, read_batch_header
from pykraft.raft.control import CONTROL_TYPE_LEADER_CHANGE, decode_leader_change
from pykraft.raft.messages import METADATA_TOPIC_NAME, OffsetAndEpoch
from pykraft.raft.snapshot import (
    CONTROL_TYPE_SNAPSHOT_FOOTER,
    CONTROL_TYPE_SNAPSHOT_HEADER,
    SnapshotError,
    decode_snapshot_footer,
    decode_snapshot_header,
    iter_batches,
    parse_snapshot_file_name,
    read_snapshot,
)

# DescribeQuorum v1 carries LastFetchTimestamp/LastCaughtUpTimestamp; v2 adds directory ids and nodes.
DESCRIBE_QUORUM_VERSION = 2
DESCRIBE_CLUSTER_VERSION = 1  # EndpointType (KIP-919): 2 lists the controllers
# DescribeCluster's endpoint_type for a --bootstrap-server / --bootstrap-controller address.
BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2

CONTROL_TYPE_NAMES = {
    0: "AbortMarker",
    1: "CommitMarker",
    2: "LeaderChangeMessage",
    3: "SnapshotHeaderRecord",
    4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord",
    6: "VotersRecord",
}
_KNOWN_NAMES = {key: record_type.__name__ for key, record_type in RECORD_TYPES_BY_API_KEY.items()}
# Kafka metadata records pykraft does not replay, by api key (kafka-facts §7.2), for readable dumps.
_KAFKA_ONLY_NAMES = {
    10: "DelegationTokenRecord",
    11: "UserScramCredentialRecord",
    18: "AccessControlEntryRecord",
    19: "RemoveAccessControlEntryRecord",
    21: "ZkMigrationStateRecord",
    22: "RemoveUserScramCredentialRecord",
    26: "RemoveDelegationTokenRecord",
    27: "RegisterControllerRecord",
    28: "ClearElrRecord",
}


class InspectError(Exception):
    pass


def _jsonable(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return uuid_to_str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "to_dict"):
        return _jsonable(value.to_dict(json=False))
    return value


@dataclass
class DumpedRecord:
    offset: int
    epoch: int
    timestamp: int
    control: bool
    record_type: str
    fields: dict[str, Any]
    api_key: int | None = None
    version: int | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "offset": self.offset,
            "epoch": self.epoch,
            "timestamp": self.timestamp,
            "control": self.control,
            "type": self.record_type,
        }
        if self.api_key is not None:
            out["api_key"] = self.api_key
            out["version"] = self.version
        out["fields"] = self.fields
        if self.error is not None:
            out["error"] = self.error
        return out

    def as_text(self) -> str:
        fields = " ".join(f"{k}={json.dumps(v)}" for k, v in self.fields.items())
        version = f" v{self.version}" if self.version is not None else ""
        kind = "control " if self.control else ""
        error = f" ERROR: {self.error}" if self.error else ""
        return f"offset={self.offset} epoch={self.epoch} {kind}{self.record_type}{version} {fields}{error}".rstrip()


def _control_record(key: bytes | None, value: bytes) -> tuple[str, dict[str, Any], str | None]:
    control_type = control_type_of(key)
    name = CONTROL_TYPE_NAMES.get(control_type, f"UnknownControl({control_type})")
    try:
        if control_type == CONTROL_TYPE_SNAPSHOT_HEADER:
            header = decode_snapshot_header(value)
            return (
                name,
                {
                    "version": header.version,
                    "last_contained_log_timestamp": header.last_contained_log_timestamp,
                },
                None,
            )
        if control_type == CONTROL_TYPE_SNAPSHOT_FOOTER:
            return name, {"version": decode_snapshot_footer(value)}, None
        if control_type == CONTROL_TYPE_LEADER_CHANGE:
            message = decode_leader_change(value)
            return (
                name,
                {
                    "version": message.version,
                    "leader_id": message.leader_id,
                    "voters": list(message.voters),
                    "granting_voters": list(message.granting_voters),
                },
                None,
            )
        if control_type == 5 and len(value) >= 4:
            return (
                name,
                {
                    "version": int.from_bytes(value[0:2], "big", signed=True),
                    "kraft_version": int.from_bytes(value[2:4], "big", signed=True),
                },
                None,
            )
    except (SnapshotError, ValueError) as error:
        return name, {"raw": value.hex()}, str(error)
    return name, {"raw": value.hex()}, None


def dump_batches(data: bytes, what: str, base_offset: int = 0) -> Iterator[DumpedRecord]:
    """Every record of ``data`` (whole batches; a torn tail ends the dump with an error)."""
    for batch in iter_batches(data, what):
        header = batch.header
        for index, record in enumerate(batch.records):
            offset = header.base_offset + index if record.offset is None else record.offset
            value = record.value if record.value is not None else b""
            if header.is_control:
                name, fields, error = _control_record(record.key, value)
                yield DumpedRecord(
                    offset, header.partition_leader_epoch, record.timestamp, True, name, fields, error=error
                )
                continue
            try:
                decoded = decode_metadata_record(value)
            except MetadataRecordError as error:
                api_key = value[1] if len(value) > 2 and value[0] == 1 else None
                name = _KAFKA_ONLY_NAMES.get(api_key or -1, f"UnknownRecord({api_key})")
                version = value[2] if api_key is not None else None
                yield DumpedRecord(
                    offset,
                    header.partition_leader_epoch,
                    record.timestamp,
                    False,
                    name,
                    {"raw": value.hex()},
                    api_key,
                    version,
                    None if api_key in _KAFKA_ONLY_NAMES else str(error),
                )
                continue
            yield DumpedRecord(
                offset,
                header.partition_leader_epoch,
                record.timestamp,
                False,
                _KNOWN_NAMES[decoded.api_key],
                _jsonable(decoded.message.to_dict(json=False)) if hasattr(decoded.message, "to_dict") else {},
                decoded.api_key,
                decoded.version,
            )


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as error:
        raise InspectError(f"{path}: {error.strerror}") from None


def _segments(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        raise InspectError(f"{directory}: not a directory")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log") and n[:-4].isdigit())
    return [os.path.join(directory, n) for n in names]


def iter_log(directory: str) -> Iterator[DumpedRecord]:
    for path in _segments(directory):
        yield from dump_batches(_read(path), path)


def latest_snapshot(directory: str) -> tuple[OffsetAndEpoch, str] | None:
    found = []
    for name in os.listdir(directory):
        parsed = parse_snapshot_file_name(name)
        if parsed is not None and not parsed.partial and not parsed.deleted:
            found.append((parsed.snapshot_id, os.path.join(directory, name)))
    return max(found) if found else None


@dataclass
class ImageSummary:
    image: MetadataImage
    snapshot: str | None
    log_records: int
    skipped: dict[str, int]


def build_image(directory: str) -> ImageSummary:
    """The latest snapshot, then every log record after it (a metadata shell's view)."""
    if not os.path.isdir(directory):
        raise InspectError(f"{directory}: not a directory")
    delta = MetadataDelta(MetadataImage.EMPTY)
    snapshot = latest_snapshot(directory)
    start = 0
    skipped: dict[str, int] = {}

    def replay(value: bytes) -> bool:
        try:
            record = decode_metadata_record(value)
        except MetadataRecordError:
            api_key = value[1] if len(value) > 2 and value[0] == 1 else -1
            name = _KAFKA_ONLY_NAMES.get(api_key, f"UnknownRecord({api_key})")
            skipped[name] = skipped.get(name, 0) + 1
            return False
        try:
            delta.replay(record)
        except MetadataReplayError:
            name = _KNOWN_NAMES[record.api_key]
            skipped[name] = skipped.get(name, 0) + 1
            return False
        return True

    if snapshot is not None:
        snapshot_id, path = snapshot
        for value in read_snapshot(_read(path), path).values:
            replay(value)
        start = snapshot_id.offset
    log_records = 0
    for path in _segments(directory):
        for batch in iter_batches(_read(path), path):
            if batch.header.is_control:
                continue
            for index, record in enumerate(batch.records):
                offset = batch.header.base_offset + index if record.offset is None else record.offset
                if offset >= start:
                    log_records += replay(record.value or b"")
    return ImageSummary(delta.apply(), snapshot[1] if snapshot else None, log_records, skipped)


def image_lines(summary: ImageSummary) -> list[str]:
    image = summary.image
    lines = [
        f"snapshot: {os.path.basename(summary.snapshot) if summary.snapshot else 'none'}",
        f"log records replayed after it: {summary.log_records}",
        f"cluster id: {image.cluster_id if image.cluster_id is not None else '(none)'}",
        f"metadata.version: {image.metadata_version}",
        f"features: {dict(sorted(image.features.finalized_versions.items()))}",
        f"next producer id: {image.producer_ids.next_producer_id}",
        f"brokers: {len(image.cluster.brokers)}",
    ]
    for broker_id in sorted(image.cluster.brokers):
        broker = image.cluster.brokers[broker_id]
        endpoints = ",".join(f"{e.name}://{e.host}:{e.port}" for e in broker.listeners)
        state = "fenced" if broker.fenced else "unfenced"
        lines.append(f"  broker {broker_id} epoch={broker.broker_epoch} {state} {endpoints}")
    topics = image.topics.topics_by_name
    partition_count = sum(len(t.partitions) for t in topics.values())
    lines.append(f"topics: {len(topics)} ({partition_count} partitions)")
    for name in sorted(topics):
        topic = topics[name]
        lines.append(f"  topic {name} id={uuid_to_str(topic.topic_id)} partitions={len(topic.partitions)}")
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            lines.append(
                f"    partition {pid} leader={p.leader} leader_epoch={p.leader_epoch} "
                f"replicas={list(p.replicas)} isr={list(p.isr)}"
            )
    if summary.skipped:
        lines.append(f"records not modelled by pykraft (skipped): {dict(sorted(summary.skipped.items()))}")
    return lines


def _fail(message: str) -> int:
    print(f"pykraft metadata: {message}", file=sys.stderr)
    return 1


def _dump(args: argparse.Namespace) -> int:
    try:
        if args.snapshot is not None:
            records: Iterator[DumpedRecord] = dump_batches(_read(args.snapshot), args.snapshot)
        else:
            records = iter_log(args.log)
        for dumped in records:
            line = json.dumps(dumped.as_json(), sort_keys=False) if args.json else dumped.as_text()
            sys.stdout.write(line + "\n")
    except (InspectError, SnapshotError) as error:
        sys.stdout.flush()
        return _fail(str(error))
    except BrokenPipeError:  # `| head`
        return 0
    return 0


def _image(args: argparse.Namespace) -> int:
    try:
        summary = build_image(args.dir)
    except (InspectError, SnapshotError) as error:
        return _fail(str(error))
    if args.json:
        image = summary.image
        out = {
            "snapshot": summary.snapshot,
            "log_records": summary.log_records,
            "cluster_id": image.cluster_id,
            "metadata_version": image.metadata_version,
            "next_producer_id": image.producer_ids.next_producer_id,
            "brokers": sorted(image.cluster.brokers),
            "topics": {
                name: {"topic_id": uuid_to_str(t.topic_id), "partitions": len(t.partitions)}
                for name, t in sorted(image.topics.topics_by_name.items())
            },
            "skipped": summary.skipped,
        }
        print(json.dumps(out))
    else:
        try:
            print("\n".join(image_lines(summary)))
        except BrokenPipeError:  # `| head`
            return 0
    return 0


def describe_quorum(address: str, timeout_s: float = 10.0, security: ClientSecurity | None = None) -> Any:
    """DescribeQuorum (api key 55) of ``__cluster_metadata-0`` from the controller or broker at
    ``address``; the partition's answer (leader, epoch, high watermark, voters, observers)."""
    return describe_quorum_response(address, timeout_s, security).topics[0].partitions[0]


def describe_quorum_response(
    address: str, timeout_s: float = 10.0, security: ClientSecurity | None = None
) -> Any:
    """The whole DescribeQuorum answer (v2 adds the voters' endpoints, ``nodes``), its errors raised as
    QuorumToolError."""
    request = DescribeQuorumRequest(
        topics=[
            DescribeQuorumRequest.TopicData(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)],
            )
        ]
    )
    with BrokerConnection.to(
        address, client_id="pykraft-metadata-quorum", timeout_s=timeout_s, security=security
    ) as conn:
        response = conn.request(request, DescribeQuorumResponse, DESCRIBE_QUORUM_VERSION)
    if response.error_code != 0:
        detail = f" ({response.error_message})" if response.error_message else ""
        raise QuorumToolError(f"DescribeQuorum failed: {ErrorCode(response.error_code).name}{detail}")
    partition = response.topics[0].partitions[0]
    if partition.error_code != 0:
        raise QuorumToolError(
            f"DescribeQuorum failed: {ErrorCode(partition.error_code).name} (ask the active controller; "
            f"leader id {partition.leader_id})"
        )
    return response


def describe_cluster_id(address: str, endpoint_type: int, security: ClientSecurity | None = None) -> str:
    """The cluster id, by DescribeCluster (KIP-919: ``endpoint_type`` 2 asks a controller, 1 a broker)."""
    request = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=endpoint_type)
    with BrokerConnection.to(address, client_id="pykraft-metadata-quorum", security=security) as conn:
        response = conn.request(request, DescribeClusterResponse, DESCRIBE_CLUSTER_VERSION)
    if response.error_code != 0:
        raise QuorumToolError(f"DescribeCluster failed: {ErrorCode(response.error_code).name}")
    return str(response.cluster_id)


class QuorumToolError(Exception):
    pass


def quorum_status_lines(response: Any, cluster_id: str) -> list[str]:
    """kafka-metadata-quorum describe --status, as Kafka 4.3's MetadataQuorumCommand.handleDescribeStatus
    prints it: the lag is the leader's end offset less the lowest voter's; its time is the leader's last
    caught-up time less that voter's (0 when the leader is the lowest, -1 when either is unknown)."""
    partition = response.topics[0].partitions[0]
    # A leader that removed itself (KIP-853) leads as an observer until the removal commits; Kafka's
    # tool throws there, this one reports it from the observers.
    states = [*partition.current_voters, *partition.observers]
    leader = next((v for v in states if v.replica_id == partition.leader_id), None)
    if leader is None or not partition.current_voters:
        raise QuorumToolError(f"DescribeQuorum names leader {partition.leader_id} but not its state")
    lowest = min(partition.current_voters, key=lambda v: v.log_end_offset)  # the first of equals
    if lowest is leader:
        max_lag_time_ms = 0
    elif leader.last_caught_up_timestamp >= 0 and lowest.last_caught_up_timestamp >= 0:
        max_lag_time_ms = leader.last_caught_up_timestamp - lowest.last_caught_up_timestamp
    else:
        max_lag_time_ms = -1
    endpoints = {
        node.node_id: [f"{listener.name}://{listener.host}:{listener.port}" for listener in node.listeners]
        for node in response.nodes
    }

    def replicas(states: Any) -> str:
        # MetadataQuorumCommand.Node.toString: the directory id only when set, the endpoints only when known
        shown = []
        for state in states:
            fields = [f'"id": {state.replica_id}']
            directory_id = state.replica_directory_id
            if directory_id is not None and directory_id != uuid.UUID(int=0):
                fields.append(f'"directoryId": "{uuid_to_str(directory_id)}"')
            if endpoints.get(state.replica_id):
                fields.append(
                    '"endpoints": [' + ", ".join(f'"{e}"' for e in endpoints[state.replica_id]) + "]"
                )
            shown.append("{" + ", ".join(fields) + "}")
        return "[" + ", ".join(shown) + "]"

    rows = [
        ("ClusterId", cluster_id),
        ("LeaderId", str(partition.leader_id)),
        ("LeaderEpoch", str(partition.leader_epoch)),
        ("HighWatermark", str(partition.high_watermark)),
        ("MaxFollowerLag", str(leader.log_end_offset - lowest.log_end_offset)),
        ("MaxFollowerLagTimeMs", str(max_lag_time_ms)),
        ("CurrentVoters", replicas(partition.current_voters)),
        ("CurrentObservers", replicas(partition.observers)),
    ]
    return [f"{name + ':':<24}{value}" for name, value in rows]


def quorum_replication_lines(partition: Any) -> list[str]:
    """kafka-metadata-quorum describe --replication: the leader first, then followers, then observers."""
    leader = partition.leader_id
    leader_state = next((v for v in partition.current_voters if v.replica_id == leader), None)
    leader_end = leader_state.log_end_offset if leader_state is not None else partition.high_watermark
    rows = [
        (
            "NodeId",
            "DirectoryId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        )
    ]
    voters = sorted(partition.current_voters, key=lambda v: (v.replica_id != leader, v.replica_id))
    for replica, status in [(v, "Leader" if v.replica_id == leader else "Follower") for v in voters] + [
        (o, "Observer") for o in sorted(partition.observers, key=lambda o: o.replica_id)
    ]:
        rows.append(
            (
                str(replica.replica_id),
                uuid_to_str(replica.replica_directory_id or uuid.UUID(int=0)),  # kafka-python: zero is None
                str(replica.log_end_offset),
                str(max(0, leader_end - replica.log_end_offset)),
                str(replica.last_fetch_timestamp),
                str(replica.last_caught_up_timestamp),
                status,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _quorum(args: argparse.Namespace) -> int:
    address = args.bootstrap_controller
    try:
        response = describe_quorum_response(address)
        lines = (
            quorum_replication_lines(response.topics[0].partitions[0])
            if args.replication
            else quorum_status_lines(response, describe_cluster_id(address, CONTROLLER_ENDPOINTS))
        )
    except (QuorumToolError, BrokerConnectionError) as exc:
        return _fail(f"--bootstrap-controller {address}: {exc}")
    print("\n".join(lines))
    return 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _metadata_quorum(args: argparse.Namespace) -> int:
    """kafka-metadata-quorum: ``--bootstrap-controller`` asks a controller; ``--bootstrap-server`` asks
    a broker, which forwards it to the active controller (Kafka's KafkaApis)."""
    from pykraft.cli.common import (
        ToolError,
        UsageError,
        admin_security,
        bootstrap_of,
        print_json,
        print_table,
    )

    if (args.bootstrap_server is None) == (args.bootstrap_controller is None):
        raise UsageError("give one of --bootstrap-server or --bootstrap-controller")
    flag = "--bootstrap-server" if args.bootstrap_server is not None else "--bootstrap-controller"
    address = bootstrap_of(args.bootstrap_server or args.bootstrap_controller, flag)
    security = admin_security(args)
    try:
        response = describe_quorum_response(address, security=security)
        cluster_id = (
            ""
            if args.json or args.replication
            else describe_cluster_id(
                address,
                BROKER_ENDPOINTS if args.bootstrap_server is not None else CONTROLLER_ENDPOINTS,
                security,
            )
        )
    except (QuorumToolError, BrokerConnectionError) as exc:
        raise ToolError(f"{flag} {address}: {exc}") from None
    partition = response.topics[0].partitions[0]
    if args.json:
        print_json(_jsonable(partition.to_dict(json=False)) if hasattr(partition, "to_dict") else {})
        return 0
    if args.replication:
        lines = quorum_replication_lines(partition)
        header, rows = lines[0].split(), [line.split() for line in lines[1:]]
        if args.human_readable:
            now_ms = _now_ms()
            for row in rows:
                for i in (4, 5):  # LastFetchTimestamp, LastCaughtUpTimestamp
                    row[i] = _ms_ago(now_ms, int(row[i]))
        print_table(header, rows)
        return 0
    try:
        lines = quorum_status_lines(response, cluster_id)
    except QuorumToolError as exc:
        raise ToolError(f"{flag} {address}: {exc}") from None
    for line in lines:
        print(line)
    return 0


def _ms_ago(now_ms: int, timestamp_ms: int) -> str:
    return "-" if timestamp_ms < 0 else f"{max(0, now_ms - timestamp_ms)} ms ago"


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    metadata = subparsers.add_parser("metadata", help="inspect metadata log segments and snapshots")
    sub = metadata.add_subparsers(dest="metadata_command", required=True)
    dump = sub.add_parser("dump", help="print every record (offset, epoch, type, fields)")
    source = dump.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE", help="a .checkpoint snapshot file")
    source.add_argument("--log", metavar="DIR", help="a __cluster_metadata-0 directory (its .log segments)")
    dump.add_argument("--json", action="store_true", help="one JSON object per line")
    dump.set_defaults(func=_dump)
    image = sub.add_parser("image", help="the image: latest snapshot + log after it")
    image.add_argument("--dir", required=True, metavar="DIR", help="a __cluster_metadata-0 directory")
    image.add_argument("--json", action="store_true", help="one JSON object")
    image.set_defaults(func=_image)
    quorum = sub.add_parser("quorum", help="describe the KRaft quorum (as kafka-metadata-quorum)")
    quorum.add_argument(
        "--bootstrap-controller", required=True, metavar="HOST:PORT", help="a controller listener"
    )
    quorum_sub = quorum.add_subparsers(dest="quorum_command", required=True)
    describe = quorum_sub.add_parser("describe", help="leader, epoch, high watermark, voters, observers")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="the quorum's leader and lag summary")
    what.add_argument("--replication", action="store_true", help="each replica's log end offset and lag")
    describe.set_defaults(func=_quorum)

    from pykraft.cli.common import run_tool

    # kafka-metadata-quorum's own shape: pykraft metadata-quorum --bootstrap-controller H:P describe --status
    tool = subparsers.add_parser(
        "metadata-quorum",
        help="describe the KRaft quorum: leader, high watermark, voters, lag (kafka-metadata-quorum)",
        description="This tool describes kraft metadata quorum status (as kafka-metadata-quorum.sh).",
    )
    where = tool.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="A comma-separated list of host:port pairs to use for establishing the connection to the Kafka "
        "cluster.",
    )
    where.add_argument(
        "--bootstrap-controller",
        metavar="HOST:PORT[,HOST:PORT]",
        help="A comma-separated list of host:port pairs to use for establishing the connection to the "
        "KRaft controllers.",
    )
    tool.add_argument(
        "--command-config",
        metavar="FILE",
        help="Property file containing configs to be passed to Admin Client (security.protocol, sasl.*, ssl.*). "
        "For add-controller, the file is used to specify the controller properties as well.",
    )
    tool_sub = tool.add_subparsers(dest="metadata_quorum_command", required=True)
    tool_describe = tool_sub.add_parser("describe", help="Describe the metadata quorum info")
    shown = tool_describe.add_mutually_exclusive_group(required=True)
    shown.add_argument(
        "--status",
        action="store_true",
        help="A short summary of the quorum status and the other provides information about the current "
        "replication state.",
    )
    shown.add_argument(
        "--replication", action="store_true", help="A detailed description of the replication state."
    )
    tool_describe.add_argument(
        "--human-readable",
        action="store_true",
        help="Used with --replication: print the timestamps as how long ago they were.",
    )
    tool_describe.add_argument(
        "--json", action="store_true", help="the DescribeQuorum answer as JSON (pykraft)"
    )
    tool_describe.set_defaults(func=run_tool("metadata-quorum", _metadata_quorum))
    from pykraft.cli.quorum_voters import add_subparsers as add_voter_change_subparsers

    add_voter_change_subparsers(tool_sub, lambda func: run_tool("metadata-quorum", func))


__all__ = ["add_subcommands", "build_image", "dump_batches", "read_batch_header"]
