"""Raw requests against a real node: every error the spine names, and bad frames."""

from __future__ import annotations

import struct
import time

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceResponse,
)

from pykraft.protocol.records import Record, build_batch
from tests.raw_client import RawClient, create_topic, fetch_request, produce_request

PRODUCE_VERSION = 9


def _produce(client: RawClient, topic: str, records: bytes, acks: int = -1):
    req = produce_request(topic, records, acks)
    resp = client.request(req, ProduceResponse, PRODUCE_VERSION)
    return resp.responses[0].partition_responses[0]


def _pid(client: RawClient) -> int:
    for _ in range(200):
        resp = client.request(
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
            InitProducerIdResponse,
            4,
        )
        if resp.error_code == 0:
            assert resp.producer_epoch == 0
            return resp.producer_id
        assert resp.error_code == 14
        time.sleep(0.02)
    raise AssertionError("no producer id")


def _batch(pid: int = -1, epoch: int = -1, seq: int = -1, n: int = 1) -> bytes:
    recs = [Record(None, b"v%d" % i) for i in range(n)]
    return bytes(
        build_batch(recs, timestamp_ms=1000, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    )


@pytest.fixture
def client(pykraft_node):
    with RawClient(pykraft_node.bootstrap_servers) as c:
        yield c


def test_api_versions_lists_what_we_implement(client) -> None:
    resp = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse, 3
    )
    assert resp.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[0] == (3, 11) and keys[1] == (4, 18) and keys[18] == (0, 4)
    assert 71 not in keys  # GetTelemetrySubscriptions is not implemented, so not advertised


def test_api_versions_unsupported_version_answers_v0_layout(client) -> None:
    # A newer client's v3+ request (flexible header) at a version we do not serve (KIP-511).
    req = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    req.API_VERSION = 3
    req.with_header(correlation_id=99, client_id="t")
    payload = bytearray(req.encode(header=True))
    struct.pack_into(">h", payload, 2, 77)  # ask for ApiVersions v77
    client.send_frame(bytes(payload))
    frame = client.recv_frame()
    resp = ApiVersionsResponse.decode(frame, version=0, header=True)
    assert resp.header.correlation_id == 99
    assert resp.error_code == 35
    assert any(k.api_key == 18 for k in resp.api_keys)


def test_bad_crc_is_corrupt_message(client) -> None:
    create_topic(client, "crc")
    batch = bytearray(_batch())
    batch[-1] ^= 0xFF
    assert _produce(client, "crc", bytes(batch)).error_code == 2


def test_magic_1_is_an_invalid_record(client) -> None:
    # Kafka's ProduceRequest.validateRecords: a produce (v3+) carries magic 2 batches only, else INVALID_RECORD
    create_topic(client, "magic")
    batch = bytearray(_batch())
    batch[16] = 1
    assert _produce(client, "magic", bytes(batch)).error_code == 87


def test_two_batches_in_one_partition_are_an_invalid_record(client) -> None:
    # Kafka's ProduceRequest.validateRecords: exactly one batch per partition
    create_topic(client, "two-batches")
    assert _produce(client, "two-batches", _batch() + _batch()).error_code == 87


def test_unknown_topic(client) -> None:
    resp = client.request(
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="nope")], allow_auto_topic_creation=False
        ),
        MetadataResponse,
        9,
    )
    assert resp.topics[0].error_code == 3
    assert _produce(client, "nope-" + "x" * 5, _batch()).error_code in (3, 5)


def test_idempotent_sequence_rules(client) -> None:
    create_topic(client, "seq")
    pid = _pid(client)
    first = _produce(client, "seq", _batch(pid, 0, 0, n=3))
    assert (first.error_code, first.base_offset) == (0, 0)
    second = _produce(client, "seq", _batch(pid, 0, 3, n=2))
    assert (second.error_code, second.base_offset) == (0, 3)
    # Exact retry of the latest batch: success with its original offset, nothing appended.
    retry = _produce(client, "seq", _batch(pid, 0, 3, n=2))
    assert (retry.error_code, retry.base_offset) == (0, 3)
    # Gap.
    assert _produce(client, "seq", _batch(pid, 0, 9)).error_code == 45
    # New epoch must start at 0.
    assert _produce(client, "seq", _batch(pid, 1, 5)).error_code == 45
    assert _produce(client, "seq", _batch(pid, 1, 0)).error_code == 0
    # Stale epoch.
    assert _produce(client, "seq", _batch(pid, 0, 5)).error_code == 47
    # The log holds exactly 3 + 2 + 1 records.
    fetch = fetch_request("seq", max_wait_ms=0, min_bytes=0)
    resp = client.request(fetch, FetchResponse, 11)
    assert resp.responses[0].partitions[0].high_watermark == 6


def test_fetch_long_poll_waits_for_data(client, pykraft_node) -> None:
    create_topic(client, "poll")
    fetch = fetch_request("poll", max_wait_ms=300, min_bytes=1)
    started = time.monotonic()
    resp = client.request(fetch, FetchResponse, 11)
    assert time.monotonic() - started >= 0.25
    assert resp.responses[0].partitions[0].records in (None, b"")


def test_oversized_frame_closes_only_that_connection(pykraft_node) -> None:
    with RawClient(pykraft_node.bootstrap_servers) as bad, RawClient(pykraft_node.bootstrap_servers) as good:
        bad.sock.sendall(struct.pack(">i", 104857600 + 1))
        assert bad.is_closed_by_peer()
        resp = good.request(ApiVersionsRequest(), ApiVersionsResponse, 0)
        assert resp.error_code == 0


def test_garbage_frame_closes_only_that_connection(pykraft_node) -> None:
    with RawClient(pykraft_node.bootstrap_servers) as bad, RawClient(pykraft_node.bootstrap_servers) as good:
        bad.send_frame(b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff\x7f\xff\xff\xff")  # Metadata v12, bad body
        assert bad.is_closed_by_peer()
        resp = good.request(ApiVersionsRequest(), ApiVersionsResponse, 0)
        assert resp.error_code == 0


def test_unsupported_produce_version_closes_connection(pykraft_node) -> None:
    with RawClient(pykraft_node.bootstrap_servers) as c:
        req = ApiVersionsRequest()
        req.API_VERSION = 0
        req.with_header(correlation_id=1, client_id="t")
        payload = bytearray(req.encode(header=True))
        struct.pack_into(">hh", payload, 0, 0, 2)  # Produce v2: below what we advertise
        c.send_frame(bytes(payload))
        assert c.is_closed_by_peer()
