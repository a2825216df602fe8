"""DescribeClientQuotas (48) and AlterClientQuotas (49) on the wire, beyond test_messages.py's filled
round trips: the null forms (a default entity's null name, a filter without a match string, a refused
describe's null entries) at both versions, decoded through the broker's path and read back by
kafka-python (issue 27 item 7, KIP-546)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from pykraft.broker.quotas_api import alter_client_quotas_error, describe_client_quotas_error
from pykraft.core.errors import ErrorCode
from pykraft.protocol import messages


def _decode(request: Any, version: int) -> Any:
    request.with_header(correlation_id=5, client_id="adminclient-1")
    frame = memoryview(bytes(request.encode(version=version, header=True)))
    header = messages.parse_request_header(frame)
    assert messages.is_supported(header.api_key, header.api_version)
    return header, messages.decode_request(header, frame)


@pytest.mark.parametrize("version", [0, 1])
def test_alter_with_a_default_entity_decodes_its_null_name_and_answers_per_entry(version: int) -> None:
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[
                    entry.EntityData(entity_type="user", entity_name=None),
                    entry.EntityData(entity_type="client-id", entity_name="app"),
                ],
                ops=[entry.OpData(key="producer_byte_rate", value=1048576.0, remove=False)],
            )
        ],
        validate_only=True,
    )
    header, decoded = _decode(request, version)
    assert [(e.entity_type, e.entity_name) for e in decoded.entries[0].entity] == [
        ("user", None),
        ("client-id", "app"),
    ]
    assert decoded.entries[0].ops[0].value == 1048576.0 and decoded.validate_only
    response = alter_client_quotas_error(decoded, version, ErrorCode.NOT_CONTROLLER, "no controller")
    read = AlterClientQuotasResponse.decode(
        bytes(messages.encode_response(header, response))[4:], version=version, header=True
    )
    assert read.header.correlation_id == 5
    assert [(e.error_code, e.error_message) for e in read.entries] == [
        (ErrorCode.NOT_CONTROLLER, "no controller")
    ]
    assert read.entries[0].entity[0].entity_name is None


@pytest.mark.parametrize("version", [0, 1])
def test_describe_filter_without_match_and_a_refusal_with_null_entries(version: int) -> None:
    component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        components=[component(entity_type="user", match_type=1, match=None)], strict=True
    )
    header, decoded = _decode(request, version)
    assert (decoded.components[0].match_type, decoded.components[0].match, decoded.strict) == (1, None, True)
    response = describe_client_quotas_error(decoded, version, ErrorCode.INVALID_REQUEST, "bad filter")
    read = DescribeClientQuotasResponse.decode(
        bytes(messages.encode_response(header, response))[4:], version=version, header=True
    )
    assert (read.error_code, read.error_message, read.entries) == (
        ErrorCode.INVALID_REQUEST,
        "bad filter",
        None,
    )
