"""``pykraft dump-log --files A.log,B.index``, shaped like kafka-dump-log (DumpLogSegments): reads
segment files offline (no broker) and prints them as Kafka does, so the two can be compared line by line.

- ``.log``: one line per batch (``baseOffset: ... lastOffset: ... count: ... CreateTime: ... size: ...
  crc: ... isvalid: true``); with ``--deep-iteration`` or ``--print-data-log`` one ``| offset: ...`` line
  per record, with its key and payload for ``--print-data-log``. ``--offsets-decoder`` prints
  ``__consumer_offsets`` records as JSON, ``--cluster-metadata-decoder`` metadata records.
- ``.index``: ``offset: ... position: ...`` per entry, checked against the ``.log`` beside it (a
  mismatch is reported as Kafka reports it); ``.timeindex``: ``timestamp: ... offset: ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from typing import Any

from crc32c import crc32c

from pykraft.cli.common import UsageError, run_tool
from pykraft.coordinator import consumer_group_records as cg
from pykraft.coordinator.offsets_records import (
    GroupKey,
    OffsetKey,
    RecordFormatError,
    assigned_partitions,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from pykraft.protocol import compression
from pykraft.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    CURRENT_MAGIC,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    BatchHeader,
    Record,
    control_type_of,
    decode_records,
    increment_sequence,
    read_batch_header,
)

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator epoch
RECORD_INDICATOR = "| "


def _base_offset(path: str) -> int:
    name = os.path.basename(path).split(".")[0]
    if not name.isdigit():
        raise UsageError(f"--files: {path}: the name is not a 20-digit base offset")
    return int(name)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise UsageError(f"--files: cannot read {path}: {exc.strerror}") from None


def batch_line(header: BatchHeader, position: int, valid: bool) -> str:
    """DumpLogSegments.printBatchLevel for a v2 batch."""
    horizon = (
        f"OptionalLong[{header.base_timestamp}]"
        if header.attributes & DELETE_HORIZON_MASK
        else "OptionalLong.empty"
    )
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.record_count} "
        f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
        f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {str(header.is_transactional).lower()} isControl: {str(header.is_control).lower()} "
        f"deleteHorizonMs: {horizon} position: {position} "
        f"{TIMESTAMP_TYPES[header.timestamp_type]}: {header.max_timestamp} size: {header.size_in_bytes} "
        f"magic: {header.magic} compresscodec: {compression.CODEC_NAMES.get(header.compression_type, 'unknown')} "
        f"crc: {header.crc} isvalid: {str(valid).lower()}"
    )


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


def _consumer_group_key_value(record: Record) -> tuple[str | None, str | None]:
    """A KIP-848 consumer group record (key versions 3-8), as Kafka's decoder prints it."""
    assert record.key is not None
    try:
        key = cg.decode_key(record.key)
    except RecordFormatError as exc:
        return f"unknown key ({exc})", None
    key_json: dict[str, Any] = {"groupId": key.group_id}
    if key.member_id:
        key_json["memberId"] = key.member_id
    key_text = json.dumps({"type": str(key.version), "data": key_json})
    if record.value is None:
        return key_text, "<DELETE>"
    value: Any
    try:
        if key.version in (cg.METADATA_KEY, cg.TARGET_ASSIGNMENT_METADATA_KEY):
            value = {"epoch": cg.decode_epoch_value(record.value)}
        elif key.version == cg.PARTITION_METADATA_KEY:
            value = {
                "topics": [
                    {"topicName": name, "topicId": str(topic_id), "numPartitions": count}
                    for name, (topic_id, count) in sorted(
                        cg.decode_partition_metadata_value(record.value).items()
                    )
                ]
            }
        elif key.version == cg.MEMBER_METADATA_KEY:
            member = cg.decode_member_metadata_value(record.value)
            value = {
                "instanceId": member.instance_id,
                "clientId": member.client_id,
                "clientHost": member.client_host,
                "subscribedTopicNames": list(member.subscribed_topic_names),
                "subscribedTopicRegex": member.subscribed_topic_regex,
                "rebalanceTimeoutMs": member.rebalance_timeout_ms,
                "serverAssignor": member.server_assignor,
            }
        elif key.version == cg.TARGET_ASSIGNMENT_MEMBER_KEY:
            value = {"topicPartitions": _topic_partitions(cg.decode_target_member_value(record.value))}
        else:
            current = cg.decode_current_assignment_value(record.value)
            value = {
                "memberEpoch": current.member_epoch,
                "previousMemberEpoch": current.previous_member_epoch,
                "state": current.state,
                "assignedPartitions": _topic_partitions(current.assigned_partitions),
                "partitionsPendingRevocation": _topic_partitions(current.partitions_pending_revocation),
            }
    except (RecordFormatError, ValueError, IndexError) as exc:
        return key_text, f"unknown value ({exc})"
    version = int.from_bytes(record.value[:2], "big", signed=True)
    return key_text, json.dumps({"version": str(version), "data": value})


def _topic_partitions(partitions: Any) -> list[dict[str, Any]]:
    return [
        {"topicId": str(topic_id), "partitions": sorted(parts)}
        for topic_id, parts in sorted(partitions.items())
    ]


def _offsets_key_value(record: Record) -> tuple[str | None, str | None]:
    """``__consumer_offsets`` records as Kafka's offsets decoder prints them: the key's type and fields,
    the value's version and fields (``<DELETE>`` for a tombstone)."""
    if record.key is None:
        return "NO_KEY", None if record.value is None else _text(record.value)
    if len(record.key) >= 2 and int.from_bytes(record.key[:2], "big") in cg.CONSUMER_GROUP_KEY_VERSIONS:
        return _consumer_group_key_value(record)
    try:
        key = decode_key(record.key)
    except RecordFormatError as exc:
        return f"unknown key ({exc})", None
    version = int.from_bytes(record.key[:2], "big", signed=True)
    value_version = int.from_bytes(record.value[:2], "big", signed=True) if record.value else None
    if isinstance(key, OffsetKey):
        key_json: dict[str, Any] = {"group": key.group_id, "topic": key.topic, "partition": key.partition}
        if record.value is None:
            return json.dumps({"type": str(version), "data": key_json}), "<DELETE>"
        offset = decode_offset_value(record.value)
        value_json: dict[str, Any] = {
            "offset": offset.offset,
            "leaderEpoch": offset.leader_epoch,
            "metadata": offset.metadata,
            "commitTimestamp": offset.commit_timestamp_ms,
        }
    else:
        assert isinstance(key, GroupKey)
        key_json = {"group": key.group_id}
        if record.value is None:
            return json.dumps({"type": str(version), "data": key_json}), "<DELETE>"
        group = decode_group_value(record.value)
        value_json = {
            "protocolType": group.protocol_type,
            "generation": group.generation,
            "protocol": group.protocol,
            "leader": group.leader,
            "currentStateTimestamp": group.current_state_timestamp_ms,
            "members": [
                {
                    "memberId": m.member_id,
                    "groupInstanceId": m.group_instance_id,
                    "clientId": m.client_id,
                    "clientHost": m.client_host,
                    "rebalanceTimeout": m.rebalance_timeout_ms,
                    "sessionTimeout": m.session_timeout_ms,
                    "assignment": _assignment_text(m.assignment),
                }
                for m in group.members
            ],
        }
    return (
        json.dumps({"type": str(version), "data": key_json}),
        json.dumps({"version": str(value_version), "data": value_json}),
    )


def _assignment_text(assignment: bytes) -> str:
    try:
        return ",".join(f"{t}-{p}" for t, parts in assigned_partitions(assignment) for p in parts)
    except RecordFormatError:
        return assignment.hex()


def _metadata_key_value(record: Record) -> tuple[str | None, str | None]:
    from pykraft.cli.metadata import _KNOWN_NAMES, _jsonable
    from pykraft.metadata.records import MetadataRecordError, decode_metadata_record

    value = record.value or b""
    try:
        decoded = decode_metadata_record(value)
    except MetadataRecordError as exc:
        return None, f"unknown metadata record ({exc})"
    data = _jsonable(decoded.message.to_dict(json=False)) if hasattr(decoded.message, "to_dict") else {}
    return None, json.dumps(
        {"type": _KNOWN_NAMES[decoded.api_key], "version": decoded.version, "data": data}, default=str
    )


def record_line(header: BatchHeader, record: Record, args: argparse.Namespace) -> str:
    """DumpLogSegments' per-record line: offset, timestamp, key and value sizes, sequence, header keys;
    a control record's marker; with --print-data-log the key and payload."""
    delta = record.offset - header.base_offset
    sequence = (
        NO_SEQUENCE
        if header.base_sequence == NO_SEQUENCE
        else increment_sequence(header.base_sequence, delta)
    )
    line = (
        f"{RECORD_INDICATOR}offset: {record.offset} {TIMESTAMP_TYPES[header.timestamp_type]}: {record.timestamp} "
        f"keySize: {-1 if record.key is None else len(record.key)} "
        f"valueSize: {-1 if record.value is None else len(record.value)} sequence: {sequence} "
        f"headerKeys: [{','.join(k for k, _ in record.headers)}]"
    )
    if header.is_control:
        control = control_type_of(record.key)
        if control in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT) and record.value and len(record.value) >= 6:
            _, coordinator_epoch = END_TXN_MARKER.unpack_from(record.value)
            kind = "COMMIT" if control == CONTROL_TYPE_COMMIT else "ABORT"
            line += f" endTxnMarker: {kind} coordinatorEpoch: {coordinator_epoch}"
        return line
    if args.print_data_log:
        if args.offsets_decoder:
            key, payload = _offsets_key_value(record)
        elif args.cluster_metadata_decoder:
            key, payload = _metadata_key_value(record)
        else:
            key = None if record.key is None else _text(record.key)
            payload = None if record.value is None else _text(record.value)
        if key is not None:
            line += f" key: {key}"
        if payload is not None:
            line += f" payload: {payload}"
    return line


def dump_log(path: str, args: argparse.Namespace, out: list[str]) -> None:
    data = _read(path)
    out.append(f"Log starting offset: {_base_offset(path)}")
    position = 0
    deep = args.deep_iteration or args.print_data_log
    while len(data) - position >= BATCH_HEADER_SIZE:
        header = read_batch_header(data, position)
        end = position + header.size_in_bytes
        if (
            header.magic != CURRENT_MAGIC
            or header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD
            or end > len(data)
        ):
            break
        valid = crc32c(data[position + ATTRIBUTES_OFFSET : end]) == header.crc
        out.append(batch_line(header, position, valid))
        if deep:
            try:
                records = decode_records(data[position:end])
            except ValueError as exc:
                out.append(f"{RECORD_INDICATOR}cannot decode the records: {exc}")
                records = []
            out.extend(record_line(header, record, args) for record in records)
        position = end
    if position < len(data):
        out.append(f"Found {len(data) - position} invalid bytes at the end of {os.path.basename(path)}")


def dump_index(path: str, out: list[str], errors: list[str]) -> None:
    data = _read(path)
    base = _base_offset(path)
    log_path = path[: -len(".index")] + ".log"
    log = _read(log_path) if os.path.exists(log_path) else None
    entries = len(data) // INDEX_ENTRY.size
    if entries == 0:
        out.append(f"{path} is empty.")
        return
    mismatches = []
    for i in range(entries):
        relative, position = INDEX_ENTRY.unpack_from(data, i * INDEX_ENTRY.size)
        if i > 0 and relative == 0 and position == 0:
            break  # the zero-filled tail of a preallocated (Kafka-written, still active) index
        out.append(f"offset: {base + relative} position: {position}")
        if log is not None and position + BATCH_HEADER_SIZE <= len(log):
            batch = read_batch_header(log, position)
            if batch.last_offset != base + relative:
                mismatches.append(f"  Index offset: {base + relative}, log offset: {batch.last_offset}")
    if mismatches:
        errors.append(f"Mismatches in :{path}")
        errors.extend(mismatches)


def dump_time_index(path: str, out: list[str]) -> None:
    data = _read(path)
    base = _base_offset(path)
    entries = len(data) // TIME_INDEX_ENTRY.size
    if entries == 0:
        out.append(f"{path} is empty.")
        return
    for i in range(entries):
        timestamp, relative = TIME_INDEX_ENTRY.unpack_from(data, i * TIME_INDEX_ENTRY.size)
        if i > 0 and timestamp == 0 and relative == 0:
            break
        out.append(f"timestamp: {timestamp} offset: {base + relative}")


def _dump_log(args: argparse.Namespace) -> int:
    if args.offsets_decoder and args.cluster_metadata_decoder:
        raise UsageError("--offsets-decoder and --cluster-metadata-decoder: give one")
    files = [f.strip() for f in args.files.split(",") if f.strip()]
    if not files:
        raise UsageError(f"--files: {args.files!r} names no file")
    errors: list[str] = []
    for path in files:
        out = [f"Dumping {path}"]
        if path.endswith(".log"):
            dump_log(path, args, out)
        elif path.endswith(".index"):
            dump_index(path, out, errors)
        elif path.endswith(".timeindex"):
            dump_time_index(path, out)
        else:
            print(f"Ignoring unknown file {path}", file=sys.stderr)
            continue
        print("\n".join(out), flush=True)
    for line in errors:
        print(line, file=sys.stderr)
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "dump-log",
        help="print log segment and index files offline (kafka-dump-log)",
        description="Decode log segment files: .log, .index and .timeindex (as kafka-dump-log.sh).",
    )
    parser.add_argument(
        "--files",
        required=True,
        metavar="FILE[,FILE]",
        help="REQUIRED: The comma separated list of data and index log files to be dumped.",
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="If set, printing the messages content when dumping data logs. Automatically set if any "
        "decoder option is specified.",
    )
    parser.add_argument(
        "--deep-iteration", action="store_true", help="if set, uses deep instead of shallow iteration."
    )
    parser.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="if set, log data will be parsed as offset data from the __consumer_offsets topic.",
    )
    parser.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="if set, log data will be parsed as cluster metadata records.",
    )

    def run(args: argparse.Namespace) -> int:
        # As Kafka: a decoder implies --print-data-log.
        args.print_data_log = args.print_data_log or args.offsets_decoder or args.cluster_metadata_decoder
        return _dump_log(args)

    parser.set_defaults(func=run_tool("dump-log", run))
