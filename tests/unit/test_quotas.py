"""Client quotas, pure: Kafka's Rate/SampledStat math, throttle times, entity resolution (ClientQuotaManager),
the controller's AlterClientQuotas checks and records (ClientQuotaControlManager), and DescribeClientQuotas
filters over the image (issue 27 item 7, KIP-546)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pykraft.broker.quotas import ClientQuotaManager, QuotaType, SampledStat, quota_user
from pykraft.broker.quotas_api import describe_client_quotas
from pykraft.controller.quotas import ClientQuotaAlteration, ClientQuotaControlManager
from pykraft.core.errors import ErrorCode
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage, image_records

C = "client-id"
U = "user"


# --- Rate over samples (org.apache.kafka.common.metrics.stats.Rate / SampledStat) --------------------


def test_rate_window_is_padded_to_samples_minus_one_windows_then_grows_with_elapsed_time() -> None:
    stat = SampledStat(samples=11, window_ms=1000)
    stat.record(1000, 0)
    # 0 ms elapsed, no full window: 10 windows of padding -> 10 s.
    assert stat.window_size_ms(0) == 10_000
    assert stat.rate_per_s(0) == pytest.approx(100.0)
    # 2.5 s: two full windows, eight padded: 2500 + 8000.
    assert stat.window_size_ms(2500) == 10_500
    # 12 s: the first sample is older than 11 windows and is reset: nothing counted any more.
    assert stat.total(12_000) == 0


def test_a_sample_is_replaced_once_it_is_a_whole_window_old() -> None:
    stat = SampledStat(samples=2, window_ms=1000)
    stat.record(10, 0)
    stat.record(20, 999)  # same sample
    stat.record(30, 1000)  # second sample
    assert stat.total(1000) == 60
    stat.record(40, 2000)  # reuses the oldest slot (reset at 2000)
    assert stat.total(2000) == 70
    assert stat.window_size_ms(2000) == 1000  # from the oldest start (1000), one full window


def test_throttle_time_is_the_time_for_the_rate_to_come_back_to_the_quota() -> None:
    produce = ClientQuotaManager(QuotaType.PRODUCE, samples=11, window_ms=1000)
    produce.update({((C, "c"),): {"producer_byte_rate": 1000.0}})
    # 10 s of quota in one go: exactly at the quota over the padded 10 s window.
    assert produce.record("ANONYMOUS", "c", 10_000, 0) == 0
    # 5000 more: rate 1500/s over 10 s -> (1500 - 1000) / 1000 * 10000 ms.
    assert produce.record("ANONYMOUS", "c", 5_000, 0) == 5_000
    # A huge burst is capped at the whole window (11 samples of 1 s).
    assert produce.record("ANONYMOUS", "c", 10**9, 0) == 11_000
    # Another client id has no quota.
    assert produce.record("ANONYMOUS", "other", 10**9, 0) == 0


def test_no_quota_set_records_nothing() -> None:
    produce = ClientQuotaManager(QuotaType.PRODUCE)
    assert produce.record("alice", "c", 10**12, 0) == 0
    assert list(produce.sensors(0)) == []


def test_request_percentage_caps_throttle_at_one_window() -> None:
    request = ClientQuotaManager(QuotaType.REQUEST, samples=11, window_ms=1000)
    request.update({((U, None),): {"request_percentage": 1.0}})
    assert request.record("alice", "c", 10_000.0, 0) == 1000


# --- quota entity precedence (ClientQuotaManager.DefaultQuotaCallback) -------------------------------


def _manager(*entities: tuple[tuple[str, str | None], ...]) -> ClientQuotaManager:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update({entity: {"producer_byte_rate": float(i + 1)} for i, entity in enumerate(entities)})
    return manager


def test_only_client_id_quotas_tag_by_client_and_fall_back_to_the_default_client() -> None:
    manager = _manager(((C, "a"),), ((C, None),))
    assert manager.metric_tags("alice", "a") == ("", "a")
    assert manager.quota_limit(("", "a")) == 1.0
    assert manager.quota_limit(manager.metric_tags("alice", "b")) == 2.0  # <default> client


def test_only_user_quotas_tag_by_user_so_all_its_clients_share_one_quota() -> None:
    manager = _manager(((U, "alice"),), ((U, None),))
    assert manager.metric_tags("alice", "a") == manager.metric_tags("alice", "b") == ("alice", "")
    assert manager.quota_limit(("alice", "")) == 1.0
    assert manager.quota_limit(manager.metric_tags("bob", "a")) == 2.0


@pytest.mark.parametrize(
    ("entities", "expected_limit"),
    [
        # Kafka's order: /users/U/clients/C, /users/U/clients/<default>, /users/U,
        # /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
        # /clients/C, /clients/<default>.
        ([((C, "app"), (U, "alice")), ((U, "alice"),), ((C, "app"),)], 1.0),
        ([((C, None), (U, "alice")), ((U, "alice"),), ((C, "app"),)], 1.0),
        ([((U, "alice"),), ((C, "app"), (U, None)), ((C, "app"),)], 1.0),
        ([((C, "app"), (U, None)), ((U, None),), ((C, "app"),)], 1.0),
        ([((C, None), (U, None)), ((U, None),), ((C, "app"),)], 1.0),
        ([((U, None),), ((C, "app"),)], 1.0),
        ([((U, "bob"),), ((C, "app"),), ((C, None),)], 2.0),
        ([((U, "bob"),), ((C, None),)], 2.0),
    ],
)
def test_mixed_quotas_resolve_in_kafkas_precedence(
    entities: list[tuple[tuple[str, str | None], ...]], expected_limit: float
) -> None:
    manager = _manager(*entities)
    assert manager.quota_limit(manager.metric_tags("alice", "app")) == expected_limit


def test_quota_user_is_the_principal_name() -> None:
    assert quota_user("User:alice") == "alice"
    assert quota_user("User:ANONYMOUS") == "ANONYMOUS"


# --- AlterClientQuotas on the controller (ClientQuotaControlManager) ---------------------------------


def _alter(
    manager: ClientQuotaControlManager, *alterations: ClientQuotaAlteration, validate_only: bool = False
) -> list[tuple[ErrorCode, str | None]]:
    records, results = manager.alter(list(alterations), validate_only)
    for record in records:
        manager.replay(record.message)
    return [(r.error_code, r.error_message) for r in results]


def test_alter_sets_and_removes_keys_and_checks_entities_and_keys_as_kafka_does() -> None:
    manager = ClientQuotaControlManager()
    alice_app = ((U, "alice"), (C, "app"))
    assert _alter(manager, ClientQuotaAlteration(alice_app, [("producer_byte_rate", 1024.0)])) == [
        (ErrorCode.NONE, None)
    ]
    assert manager.quotas() == {((C, "app"), (U, "alice")): {"producer_byte_rate": 1024.0}}
    bad = [
        ClientQuotaAlteration((), [("producer_byte_rate", 1.0)]),
        ClientQuotaAlteration((("group", "g"),), [("producer_byte_rate", 1.0)]),
        ClientQuotaAlteration((("ip", "10.0.0.1"),), [("connection_creation_rate", 1.0)]),
        ClientQuotaAlteration(((U, ""),), [("producer_byte_rate", 1.0)]),
        ClientQuotaAlteration(((U, "a"), (U, "b")), [("producer_byte_rate", 1.0)]),
        ClientQuotaAlteration(((U, "x"),), [("bogus_rate", 1.0)]),
        ClientQuotaAlteration(((U, "y"),), [("producer_byte_rate", 1.5)]),
        ClientQuotaAlteration(((U, "n"),), [("request_percentage", float("nan"))]),
        ClientQuotaAlteration(((U, "z"),), [("request_percentage", 1.0), ("request_percentage", 2.0)]),
        ClientQuotaAlteration(((C, "app"), (U, "alice")), [("consumer_byte_rate", 5.0)]),  # a duplicate
    ]
    assert _alter(manager, *bad) == [
        (ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"),
        (ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group"),
        (ErrorCode.INVALID_REQUEST, "ip quotas (connection_creation_rate) are not supported by pykraft"),
        (ErrorCode.INVALID_REQUEST, "Empty user not supported"),
        (ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity, duplicate entity entry user"),
        (ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus_rate"),
        (ErrorCode.INVALID_REQUEST, "Configuration producer_byte_rate must be a Long value"),
        (ErrorCode.INVALID_REQUEST, "Configuration request_percentage must be a number, not NaN"),
        (
            ErrorCode.INVALID_REQUEST,
            "Duplicate quota key request_percentage not updating quota for this entity user z",
        ),
        (ErrorCode.NONE, None),
    ]
    assert _alter(
        manager, ClientQuotaAlteration(alice_app, [("consumer_byte_rate", 5.0)]), validate_only=True
    ) == [(ErrorCode.NONE, None)]
    assert manager.quotas()[((C, "app"), (U, "alice"))] == {
        "producer_byte_rate": 1024.0,
        "consumer_byte_rate": 5.0,
    }
    # Removing every key removes the entity; removing a key that is not set writes nothing.
    records, _ = manager.alter(
        [ClientQuotaAlteration(alice_app, [("producer_byte_rate", None), ("consumer_byte_rate", None)])],
        False,
    )
    assert len(records) == 2
    for record in records:
        manager.replay(record.message)
    assert manager.quotas() == {}
    assert manager.alter([ClientQuotaAlteration(alice_app, [("producer_byte_rate", None)])], False)[0] == []


# --- the image and DescribeClientQuotas ---------------------------------------------------------------


def _image(*alterations: ClientQuotaAlteration) -> MetadataImage:
    records, _ = ClientQuotaControlManager().alter(list(alterations), False)
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay_all(records)
    return delta.apply()


def _component(entity_type: str, match_type: int, match: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(entity_type=entity_type, match_type=match_type, match=match)


def _describe(image: MetadataImage, *components: SimpleNamespace, strict: bool = False) -> object:
    request = SimpleNamespace(components=list(components), strict=strict)
    return describe_client_quotas(request, 1, image.client_quotas.entities)


def test_image_round_trips_quotas_and_describe_filters_as_kafka() -> None:
    image = _image(
        ClientQuotaAlteration(((U, "alice"),), [("producer_byte_rate", 100.0)]),
        ClientQuotaAlteration(((U, None),), [("producer_byte_rate", 50.0)]),
        ClientQuotaAlteration(((U, "alice"), (C, "app")), [("request_percentage", 20.0)]),
        ClientQuotaAlteration(((C, None),), [("consumer_byte_rate", 10.0)]),
    )
    reloaded = MetadataDelta(MetadataImage.EMPTY)
    reloaded.replay_all(image_records(image))
    assert reloaded.apply().client_quotas == image.client_quotas

    def entities(response: object) -> list[list[tuple[str, str | None]]]:
        return [[(e.entity_type, e.entity_name) for e in entry.entity] for entry in response.entries]  # type: ignore[attr-defined]

    # Exact user: every entity naming alice (not strict), only the user alone (strict).
    assert entities(_describe(image, _component(U, 0, "alice"))) == [
        [(C, "app"), (U, "alice")],
        [(U, "alice")],
    ]
    assert entities(_describe(image, _component(U, 0, "alice"), strict=True)) == [[(U, "alice")]]
    # The default user, and any user (defaults included).
    assert entities(_describe(image, _component(U, 1), strict=True)) == [[(U, None)]]
    assert len(_describe(image, _component(U, 2), strict=True).entries) == 2  # type: ignore[attr-defined]
    assert entities(_describe(image, _component(C, 1), strict=True)) == [[(C, None)]]
    values = _describe(image, _component(U, 0, "alice"), strict=True).entries[0].values  # type: ignore[attr-defined]
    assert [(v.key, v.value) for v in values] == [("producer_byte_rate", 100.0)]


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([_component("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        (
            [_component(U, 0, "a"), _component(U, 2)],
            ErrorCode.INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([_component("group", 0, "g")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (
            [_component(U, 0)],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [_component(U, 1, "a")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        ([_component(U, 7)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
    ],
)
def test_describe_refuses_bad_filters_with_kafkas_errors(
    components: list[SimpleNamespace], error: ErrorCode, message: str
) -> None:
    response = _describe(MetadataImage.EMPTY, *components)
    assert (response.error_code, response.error_message, response.entries) == (error, message, None)  # type: ignore[attr-defined]
