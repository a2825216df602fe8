"""Request/response codecs over kafka-python's schema-driven classes, plus the ApiVersions table.

kafka-python 3.0.12 (``kafka.protocol.*``) generates a decoder and an encoder per (message, version)
from Kafka's JSON schemas. We use it server-side, with three deviations from its own request path
(reference/peers-and-clients.md §6):

- the request header is parsed by hand: the library's ``decode(header=True)`` copies the whole payload
  into a ``BytesIO`` just to read the header;
- the body is decoded from a memoryview through the compiled decoder, so that we learn where it ended
  and can reject trailing bytes (``ApiMessage.decode`` discards the end position);
- the library does not enforce minimum versions; :func:`decode_request` enforces the schema's range and
  the caller enforces :data:`SUPPORTED_VERSIONS` (answering UNSUPPORTED_VERSION, not closing).

Messages the library lacks (the KRaft RPCs) are loaded from our own JSON schemas in
``pykraft.protocol.schemas`` through the library's loader, so they behave exactly like its own classes.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, cast

import kafka.protocol.admin as _kp_admin
import kafka.protocol.consumer as _kp_consumer
import kafka.protocol.metadata as _kp_metadata
import kafka.protocol.producer as _kp_producer
import kafka.protocol.sasl as _kp_sasl
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse

from pykraft.core.errors import ErrorCode, RemoteProtocolError
from pykraft.protocol import wire


class ApiKey(IntEnum):
    """Kafka's api keys (clients/.../common/protocol/ApiKeys.java), up to the KIP-853 voter RPCs."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# What the client listener advertises in ApiVersions, inclusive ranges. Fetch stops at 12 because
# Fetch 13+ names topics by id (peers-and-clients.md §7); GetTelemetrySubscriptions is absent on
# purpose: librdkafka calls it whenever it is advertised (KIP-714).
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 11),
    # KIP-320: where a leader epoch ends (v0-1 gone in Kafka 4.0, KIP-896).
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.METADATA: (0, 13),
    # Classic consumer groups (coordinator/): OffsetCommit/OffsetFetch stop before v10 (topic ids).
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    # KIP-195, forwarded to the active controller; v3 only adds THROTTLING_QUOTA_EXCEEDED (KIP-599).
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    # Transactions (issue 15): KIP-98 with KIP-360 bumps and KIP-890 part 1 verification. The versions
    # stop before transaction.version 2 (KIP-890 part 2: EndTxn v5, AddOffsetsToTxn v4, TxnOffsetCommit
    # v5, Produce v12); AddPartitionsToTxn v4 is the brokers' batched verify-only form.
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    # Preferred and unclean leader election (KIP-460), forwarded to the active controller.
    ApiKey.ELECT_LEADERS: (0, 2),
    # Partition reassignment (KIP-455; v1 is KIP-860's AllowReplicationFactorChange), forwarded too.
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # Broker decommission (KIP-631's UnregisterBroker), forwarded to the active controller.
    ApiKey.UNREGISTER_BROKER: (0, 0),
    # Producer state (issue 5): KIP-758's window is advertised as a broker config; KIP-664 view.
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    # Topic configs altered through the active controller (issue 17, KIP-339).
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # Client quotas (KIP-546), enforced with throttle times and muted connections (KIP-219).
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # SASL (issue 16): SaslHandshake v1 then SaslAuthenticate (KIP-152), and v0's bare tokens, which
    # older librdkafka (2.0) needs advertised to use SASL at all.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    # SCRAM credentials in the metadata log (KIP-554) and ACLs (KRaft's StandardAuthorizer).
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    # Admin describes answered from the broker's own state (broker/cluster_admin.py). DescribeCluster v2
    # lists fenced brokers on request (KIP-1073); DescribeLogDirs starts at v1 as Kafka 4.0's does
    # (KIP-896); v5 adds IsCordoned (KIP-1066), always false: pykraft has no cordoned.log.dirs, so no
    # dir is ever cordoned. (kafka-python 3.0.12 reads a broker serving v5 as Kafka 4.3.)
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    # KRaft's quorum (kafka-metadata-quorum --bootstrap-server): a broker forwards it to the active
    # controller (KafkaApis), so it advertises what the controller listener serves (raft.wire.VERSIONS),
    # as Kafka's broker intersects a forwardable API with its controller's ApiVersions.
    ApiKey.DESCRIBE_QUORUM: (1, 2),
    # The consumer group protocol (KIP-848, issue 19): v1 adds the server-side regex subscription.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    # Share groups (KIP-932, issue 31): the stable versions (v0 was Kafka 4.0's early access).
    # ShareFetch/ShareAcknowledge stop before v2 (KIP-1206's acquire modes, KIP-1222's RENEW).
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 1),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 1),
    # Between partition leaders and share coordinators (``__share_group_state``), CLUSTER_ACTION.
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 0),
    # Share-group offsets from the group coordinator (kafka-share-groups --describe / --reset-offsets).
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    # Finalized feature levels (KIP-584/KIP-778), forwarded to the active controller; v2 answers with the
    # top-level error only.
    ApiKey.UPDATE_FEATURES: (0, 2),
}


# --- our schema classes (messages kafka-python 3.0.12 lacks) -------------------------------------------

_SCHEMAS = "pykraft.protocol.schemas"


def _schema_class(name: str) -> Any:
    # kafka-python's loader reads pykraft/protocol/schemas/<name>.json; the class name must equal the
    # file name. Calling the metaclass directly keeps the result typed as Any for mypy.
    return type(ApiMessage)(name, (ApiMessage,), {"__module__": __name__}, load_json=_SCHEMAS)


VoteRequest: Any = _schema_class("VoteRequest")
VoteResponse: Any = _schema_class("VoteResponse")
BeginQuorumEpochRequest: Any = _schema_class("BeginQuorumEpochRequest")
BeginQuorumEpochResponse: Any = _schema_class("BeginQuorumEpochResponse")
EndQuorumEpochRequest: Any = _schema_class("EndQuorumEpochRequest")
EndQuorumEpochResponse: Any = _schema_class("EndQuorumEpochResponse")
FetchSnapshotRequest: Any = _schema_class("FetchSnapshotRequest")
FetchSnapshotResponse: Any = _schema_class("FetchSnapshotResponse")
AllocateProducerIdsRequest: Any = _schema_class("AllocateProducerIdsRequest")
AllocateProducerIdsResponse: Any = _schema_class("AllocateProducerIdsResponse")
BrokerRegistrationRequest: Any = _schema_class("BrokerRegistrationRequest")
BrokerRegistrationResponse: Any = _schema_class("BrokerRegistrationResponse")
BrokerHeartbeatRequest: Any = _schema_class("BrokerHeartbeatRequest")
BrokerHeartbeatResponse: Any = _schema_class("BrokerHeartbeatResponse")
AlterPartitionRequest: Any = _schema_class("AlterPartitionRequest")
AlterPartitionResponse: Any = _schema_class("AlterPartitionResponse")
ConsumerGroupHeartbeatRequest: Any = _schema_class("ConsumerGroupHeartbeatRequest")
ConsumerGroupHeartbeatResponse: Any = _schema_class("ConsumerGroupHeartbeatResponse")
ConsumerGroupDescribeRequest: Any = _schema_class("ConsumerGroupDescribeRequest")
ConsumerGroupDescribeResponse: Any = _schema_class("ConsumerGroupDescribeResponse")
UnregisterBrokerRequest: Any = _schema_class("UnregisterBrokerRequest")
UnregisterBrokerResponse: Any = _schema_class("UnregisterBrokerResponse")
ShareGroupHeartbeatRequest: Any = _schema_class("ShareGroupHeartbeatRequest")
ShareGroupHeartbeatResponse: Any = _schema_class("ShareGroupHeartbeatResponse")
ShareGroupDescribeRequest: Any = _schema_class("ShareGroupDescribeRequest")
ShareGroupDescribeResponse: Any = _schema_class("ShareGroupDescribeResponse")
ShareFetchRequest: Any = _schema_class("ShareFetchRequest")
ShareFetchResponse: Any = _schema_class("ShareFetchResponse")
ShareAcknowledgeRequest: Any = _schema_class("ShareAcknowledgeRequest")
ShareAcknowledgeResponse: Any = _schema_class("ShareAcknowledgeResponse")
InitializeShareGroupStateRequest: Any = _schema_class("InitializeShareGroupStateRequest")
InitializeShareGroupStateResponse: Any = _schema_class("InitializeShareGroupStateResponse")
ReadShareGroupStateSummaryRequest: Any = _schema_class("ReadShareGroupStateSummaryRequest")
ReadShareGroupStateSummaryResponse: Any = _schema_class("ReadShareGroupStateSummaryResponse")
ReadShareGroupStateRequest: Any = _schema_class("ReadShareGroupStateRequest")
ReadShareGroupStateResponse: Any = _schema_class("ReadShareGroupStateResponse")
WriteShareGroupStateRequest: Any = _schema_class("WriteShareGroupStateRequest")
WriteShareGroupStateResponse: Any = _schema_class("WriteShareGroupStateResponse")
DescribeShareGroupOffsetsRequest: Any = _schema_class("DescribeShareGroupOffsetsRequest")
DescribeShareGroupOffsetsResponse: Any = _schema_class("DescribeShareGroupOffsetsResponse")
AlterShareGroupOffsetsRequest: Any = _schema_class("AlterShareGroupOffsetsRequest")
AlterShareGroupOffsetsResponse: Any = _schema_class("AlterShareGroupOffsetsResponse")
DeleteShareGroupStateRequest: Any = _schema_class("DeleteShareGroupStateRequest")
DeleteShareGroupStateResponse: Any = _schema_class("DeleteShareGroupStateResponse")
DeleteShareGroupOffsetsRequest: Any = _schema_class("DeleteShareGroupOffsetsRequest")
DeleteShareGroupOffsetsResponse: Any = _schema_class("DeleteShareGroupOffsetsResponse")
# KIP-853: a dynamic controller quorum's voter changes (kafka-metadata-quorum add/remove-controller).
AddRaftVoterRequest: Any = _schema_class("AddRaftVoterRequest")
AddRaftVoterResponse: Any = _schema_class("AddRaftVoterResponse")
RemoveRaftVoterRequest: Any = _schema_class("RemoveRaftVoterRequest")
RemoveRaftVoterResponse: Any = _schema_class("RemoveRaftVoterResponse")
UpdateRaftVoterRequest: Any = _schema_class("UpdateRaftVoterRequest")
UpdateRaftVoterResponse: Any = _schema_class("UpdateRaftVoterResponse")


# DescribeQuorum ships with kafka-python (0-2, the current schema); re-exported for symmetry.
DescribeQuorumRequest: Any = _kp_admin.DescribeQuorumRequest
DescribeQuorumResponse: Any = _kp_admin.DescribeQuorumResponse

OUR_MESSAGE_CLASSES: tuple[Any, ...] = (
    VoteRequest,
    VoteResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
)


def _collect_classes() -> tuple[dict[int, Any], dict[int, Any]]:
    requests: dict[int, Any] = {}
    responses: dict[int, Any] = {}
    library_classes = [
        getattr(module, name)
        for module in (_kp_metadata, _kp_admin, _kp_consumer, _kp_producer, _kp_sasl)
        for name in module.__all__
    ]
    for cls in [*library_classes, *OUR_MESSAGE_CLASSES]:
        if not (isinstance(cls, type) and issubclass(cls, ApiMessage)):
            continue
        cls = cast(Any, cls)
        table = requests if cls.is_request() else responses
        assert cls.API_KEY not in table, f"two classes for api key {cls.API_KEY}: {cls.__name__}"
        table[cls.API_KEY] = cls
    return requests, responses


_REQUEST_CLASSES, _RESPONSE_CLASSES = _collect_classes()


def _schema_version_range(cls: Any) -> tuple[int, int]:
    # kafka-python resets every schema's minimum to 0 (gotcha 2); the JSON keeps the real one.
    low, high = cls._valid_versions
    text = cls.json["validVersions"]
    if "-" in text:
        low = int(text.split("-")[0])
    elif not text.endswith("+"):
        low = int(text)
    return int(low), int(high)


_VERSION_RANGES: dict[int, tuple[int, int]] = {
    key: _schema_version_range(cls) for key, cls in _REQUEST_CLASSES.items()
}
# First flexible version per api key; flexibility is open-ended ("N+"), so a request at a version above
# the newest we know still carries a v2 header (ApiVersions v127 from a future client, KIP-511).
_FLEXIBLE_FROM: dict[int, int] = {
    key: int(cls._flexible_versions[0])
    for key, cls in _REQUEST_CLASSES.items()
    # "flexibleVersions": "none" loads as (-1, -1): never flexible (OffsetDelete, SaslHandshake).
    if cls._flexible_versions is not None and cls._flexible_versions[0] >= 0
}


def request_class(api_key: int) -> Any | None:
    """The kafka-python-style request class for ``api_key``, or None if we have no schema for it."""
    return _REQUEST_CLASSES.get(api_key)


def response_class(api_key: int) -> Any | None:
    """The kafka-python-style response class for ``api_key``, or None if we have no schema for it."""
    return _RESPONSE_CLASSES.get(api_key)


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether ``api_version`` of ``api_key`` uses compact encodings and tagged fields (False if unknown)."""
    flexible_from = _FLEXIBLE_FROM.get(api_key)
    return flexible_from is not None and api_version >= flexible_from


def is_supported(api_key: int, api_version: int) -> bool:
    """Whether the client listener advertises ``api_version`` of ``api_key``."""
    versions = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return versions is not None and versions[0] <= api_version <= versions[1]


# --- request header ---------------------------------------------------------------------------------------

_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """Request header v1/v2. ``body_offset`` is where the body starts within the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int
    flexible: bool


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip one tagged-field section of a request and return the position after it."""
    try:
        return wire.skip_tagged_fields(buf, pos)
    except wire.WireFormatError as exc:
        raise RemoteProtocolError(f"request tagged fields: {exc}") from None


def parse_request_header(frame: memoryview) -> RequestHeader:
    """Parse the request header at the start of ``frame`` (the request without its 4-byte size).

    ``client_id`` stays a classic int16-length string even in header v2 (Kafka keeps it so, so that any
    broker can read the header of an ApiVersions request at a version it does not know).
    """
    if len(frame) < _HEADER_FIXED.size:
        raise RemoteProtocolError(f"request header needs {_HEADER_FIXED.size} bytes, got {len(frame)}")
    api_key, api_version, correlation_id, client_id_len = _HEADER_FIXED.unpack_from(frame, 0)
    pos = _HEADER_FIXED.size
    client_id: str | None
    if client_id_len == -1:
        client_id = None
    elif client_id_len < -1:
        raise RemoteProtocolError(f"request header client_id length {client_id_len}")
    else:
        end = pos + client_id_len
        if end > len(frame):
            raise RemoteProtocolError("request header client_id runs past the end of the request")
        try:
            client_id = str(frame[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"request header client_id is not UTF-8: {exc}") from None
        pos = end
    flexible = is_flexible(api_key, api_version)
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos, flexible)


# --- request body ----------------------------------------------------------------------------------------


def decode_request(header: RequestHeader, frame: memoryview) -> Any:
    """Decode the body of ``frame`` with kafka-python at ``header.api_version``.

    Raises RemoteProtocolError for an api key we have no schema for, a version outside the schema's
    range, bytes that do not parse, or bytes left over after the body. The caller checks
    :func:`is_supported` first: an unsupported version is answered, not a reason to close.
    """
    cls = _REQUEST_CLASSES.get(header.api_key)
    if cls is None:
        raise RemoteProtocolError(f"no schema for api key {header.api_key}")
    low, high = _VERSION_RANGES[header.api_key]
    if not low <= header.api_version <= high:
        raise RemoteProtocolError(
            f"{cls.__name__} version {header.api_version} is outside the schema's {low}-{high}"
        )
    flexible = header.flexible
    try:
        decoder = cls._struct.compiled_decode_from(
            header.api_version, compact=flexible, tagged=flexible, data_class=cls
        )
        request, end = decoder(frame, header.body_offset)
    except Exception as exc:  # every failure inside the generated decoder means the peer's bytes are bad
        raise RemoteProtocolError(
            f"{cls.__name__} v{header.api_version} does not parse: {type(exc).__name__}: {exc}"
        ) from None
    if end > len(frame):
        # kafka-python's slices do not fail when they run past the end: a truncated request.
        raise RemoteProtocolError(
            f"{cls.__name__} v{header.api_version}: body needs {end} bytes, request has {len(frame)}"
        )
    # Bytes past the schema's end are tolerated, as Kafka's parser does: librdkafka's requests can
    # carry fields a schema version does not list (seen with Metadata v12).
    null = _first_forbidden_null(request, _null_plan(cls, header.api_version))
    if null is not None:
        # Kafka's generated readers throw "non-nullable field X was serialized as null": a malformed
        # request, refused here rather than met by a handler that iterates it.
        raise RemoteProtocolError(f"{cls.__name__} v{header.api_version}: non-nullable field {null} is null")
    return request


# (attribute, nullable at this version, sub-plan of an array of structs, its elements are strings or
# bytes that may not be null)
_NullPlan = tuple[tuple[str, bool, "_NullPlan | None", bool], ...]
_NULL_PLANS: dict[tuple[Any, int], _NullPlan] = {}
_NULLABLE_KINDS = ("string", "bytes", "records")


def _null_plan(cls: Any, version: int) -> _NullPlan:
    key = (cls, version)
    plan = _NULL_PLANS.get(key)
    if plan is None:
        plan = _NULL_PLANS[key] = _plan_fields(cls.fields.values(), version)
    return plan


def _plan_fields(fields: Any, version: int) -> _NullPlan:
    """The fields of ``version`` that may hold None once decoded: arrays, strings, bytes (kafka-python's
    Field objects carry the schema's versions and nullableVersions)."""
    plan = []
    for field in fields:
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        struct_array = bool(field.is_struct_array())
        if not (struct_array or field.is_array() or field._type_str in _NULLABLE_KINDS):
            continue
        nullable = bool(field.nullable_for_version_q(version))
        sub = _plan_fields(field.fields.values(), version) if struct_array else None
        # An array of strings holds no null string: Kafka's readers refuse one (ListGroups' filters).
        elements = not struct_array and field.is_array() and field._type_str[2:] in _NULLABLE_KINDS
        if nullable and not sub and not elements:
            continue
        plan.append((field.name, nullable, sub, elements))
    return tuple(plan)


def _first_forbidden_null(obj: Any, plan: _NullPlan) -> str | None:
    for attribute, nullable, sub, elements in plan:
        value = getattr(obj, attribute, None)
        if value is None:
            if not nullable:
                return attribute
            continue
        if elements and any(item is None for item in value):
            return f"{attribute}[]"
        if sub:
            for item in value:
                found = _first_forbidden_null(item, sub)
                if found is not None:
                    return f"{attribute}.{found}"
    return None


# The schemas' default for an authorized-operations field nobody asked for (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


# --- responses ------------------------------------------------------------------------------------------


def array_entry_encoder(container_cls: Any, flexible: bool) -> Callable[[Any, int], bytes]:
    """Encodes one entry of a response's array of ``container_cls`` (e.g. MetadataResponseTopic) at a
    version, as kafka-python's encoder writes it inside the whole response."""
    entry = container_cls._struct.array_of
    return lambda item, version: bytes(entry.encode(item, version=version, compact=flexible, tagged=flexible))


@dataclass(slots=True)
class SplicedResponse:
    """A response encoded by kafka-python without the entries of its last array, and those entries as
    bytes already encoded at the response's version (cached per entry by the handler: issue 29's
    Metadata and DescribeTopicPartitions). Where the array is: ``tail_bytes`` after it (the encoding
    ends with fixed-size fields and tags), or else ``head_bytes`` of the body before it."""

    shell: Any
    entries: list[bytes]
    flexible: bool
    tail_bytes: int | None = None
    head_bytes: int | None = None

    @property
    def throttle_time_ms(self) -> int:
        return int(self.shell.throttle_time_ms)

    @throttle_time_ms.setter
    def throttle_time_ms(self, value: int) -> None:
        self.shell.throttle_time_ms = value

    def frame(self, header: RequestHeader) -> bytearray:
        shell = self.shell
        shell._header = None
        shell.API_VERSION = header.api_version
        shell.with_header(correlation_id=header.correlation_id)
        empty = bytes(shell.encode(header=True))
        marker = b"\x01" if self.flexible else b"\x00\x00\x00\x00"  # an empty (compact) array
        if self.tail_bytes is not None:
            cut = len(empty) - self.tail_bytes - len(marker)
        else:
            assert self.head_bytes is not None
            # The response header: the correlation id, then (flexible versions) its tagged fields.
            cut = 4 + (1 if self.flexible else 0) + self.head_bytes
        assert empty[cut : cut + len(marker)] == marker, (empty.hex(), self.tail_bytes, self.head_bytes)
        count = len(self.entries)
        out = bytearray(struct.pack(">i", 0))
        out += empty[:cut]
        if self.flexible:
            wire.put_uvarint(out, count + 1)
        else:
            out += struct.pack(">i", count)
        for entry in self.entries:
            out += entry
        out += empty[cut + len(marker) :]
        struct.pack_into(">i", out, 0, len(out) - 4)
        return out


def encode_response(header: RequestHeader, response: Any) -> bytearray:
    """Frame ``response`` (4-byte size, response header, body) at the request's version.

    The response header is v1 (with tagged fields) for flexible versions and v0 otherwise; ApiVersions
    responses always use v0 (KIP-511), which kafka-python's ApiVersionsResponse does on its own.
    ``response`` is modified: its version and header are set.
    """
    if isinstance(response, SplicedResponse):
        return response.frame(header)
    # Gotcha 1: the API_VERSION setter assumes a request header; drop any header first, set the
    # version, then attach a fresh response header.
    response._header = None
    response.API_VERSION = header.api_version
    response.with_header(correlation_id=header.correlation_id)
    encoded: bytearray = response.encode(header=True, framed=True)
    return encoded


def _api_versions_entries(table: dict[ApiKey, tuple[int, int]], only: ApiKey | None = None) -> list[Any]:
    api_version = ApiVersionsResponse.ApiVersion
    return [
        api_version(api_key=int(key), min_version=low, max_version=high)
        for key, (low, high) in sorted(table.items())
        if only is None or key == only
    ]


@dataclass(frozen=True, slots=True)
class ApiVersionsFeatures:
    """ApiVersions v3+'s tagged feature fields (KIP-584): the levels this node supports, the finalized
    levels of its metadata image and their epoch (Kafka: the image's offset; -1 when unknown)."""

    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    finalized_features_epoch: int


def _feature_fields(version: int, features: ApiVersionsFeatures) -> dict[str, Any]:
    supported_key = ApiVersionsResponse.SupportedFeatureKey
    finalized_key = ApiVersionsResponse.FinalizedFeatureKey
    return {
        # v3 omits features whose minimum is 0 (old clients reject it); v4 lists them all.
        "supported_features": [
            supported_key(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(features.supported.items())
            if version >= 4 or low > 0
        ],
        "finalized_features_epoch": features.finalized_features_epoch,
        # Kafka's FinalizedFeatureKey: min and max are both the finalized level.
        "finalized_features": [
            finalized_key(name=name, max_version_level=level, min_version_level=level)
            for name, level in sorted(features.finalized.items())
        ],
    }


def api_versions_response(
    header: RequestHeader,
    table: dict[ApiKey, tuple[int, int]] | None = None,
    features: ApiVersionsFeatures | None = None,
) -> bytearray:
    """The full framed ApiVersions response for ``header``.

    For a version we support: error NONE, the :data:`SUPPORTED_VERSIONS` table, throttle 0, and from v3
    the ``features`` (kafka-python omits default-valued tagged fields). For a version we do not support: what Kafka
    answers (ApiVersionsRequest.getErrorResponse): UNSUPPORTED_VERSION in the v0 layout with a v0
    header, listing only the ApiVersions range so the client can retry at a version we accept.
    """
    low, high = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    if low <= header.api_version <= high:
        response = ApiVersionsResponse(
            version=header.api_version,
            error_code=ErrorCode.NONE,
            api_keys=_api_versions_entries(SUPPORTED_VERSIONS if table is None else table),
            throttle_time_ms=0,
            **(_feature_fields(header.api_version, features) if features and header.api_version >= 3 else {}),
        )
        return encode_response(header, response)
    response = ApiVersionsResponse(
        version=0,
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=_api_versions_entries(SUPPORTED_VERSIONS, only=ApiKey.API_VERSIONS),
    )
    return encode_response(dataclasses.replace(header, api_version=0, flexible=False), response)


__all__ = [
    "OUR_MESSAGE_CLASSES",
    "SUPPORTED_VERSIONS",
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AlterShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "ApiKey",
    "ApiVersionsFeatures",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "DeleteShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsResponse",
    "DeleteShareGroupStateRequest",
    "DeleteShareGroupStateResponse",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "InitializeShareGroupStateRequest",
    "InitializeShareGroupStateResponse",
    "ReadShareGroupStateRequest",
    "ReadShareGroupStateResponse",
    "ReadShareGroupStateSummaryRequest",
    "ReadShareGroupStateSummaryResponse",
    "RequestHeader",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
    "VoteRequest",
    "VoteResponse",
    "WriteShareGroupStateRequest",
    "WriteShareGroupStateResponse",
    "api_versions_response",
    "decode_request",
    "encode_response",
    "is_flexible",
    "is_supported",
    "parse_request_header",
    "request_class",
    "response_class",
    "skip_tagged_fields",
]
