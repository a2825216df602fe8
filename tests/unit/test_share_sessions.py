"""Share sessions end with the client connection that opened them (broker/share_fetch.py, as Kafka 4.1+'s
ShareSessionCache ClientConnectionDisconnectListener): the member's acquired records are released at once
instead of after their lock duration, and a session its member opened again on another connection
outlives the old connection."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from pykraft.broker.share_fetch import ShareManager, ShareManagerConfig
from pykraft.coordinator.share_partition import RecordState, SharePartition

TOPIC_ID = uuid.uuid4()
KEY = ("g", TOPIC_ID, 0)


def share_fetch(member_id: str, epoch: int) -> Any:
    """A ShareFetch request of ``member_id`` for partition 0 of the topic, without acknowledgements."""
    partition = SimpleNamespace(partition_index=0, acknowledgement_batches=[])
    return SimpleNamespace(
        group_id="g",
        member_id=member_id,
        share_session_epoch=epoch,
        max_records=500,
        topics=[SimpleNamespace(topic_id=TOPIC_ID, partitions=[partition])],
        forgotten_topics_data=[],
    )


def manager_holding(member_id: str, connection_id: str) -> tuple[ShareManager, SharePartition]:
    """A manager where ``member_id`` opened its share session on ``connection_id`` and holds 0-9."""
    # The session steps and releases never look at the cluster (the broker context).
    manager = ShareManager(ctx=None, config=ShareManagerConfig())  # type: ignore[arg-type]
    fetch = manager.begin_fetch(share_fetch(member_id, 0), now_ms=0, connection_id=connection_id)
    assert fetch.session is not None and fetch.session.connection_id == connection_id
    sp = manager.partitions[KEY] = SharePartition(0)
    assert sp.acquire(member_id, [(0, 9)], 10, 500, now_ms=0)
    return manager, sp


def test_closing_the_connection_releases_what_its_session_member_holds() -> None:
    manager, sp = manager_holding("m1", "client-127.0.0.1:5000-1")
    assert not manager.connection_closed("client-127.0.0.1:5001-2")  # another client's connection
    assert sp.acquired_by("m1") == 10
    assert manager.connection_closed("client-127.0.0.1:5000-1")
    assert sp.acquired_by("m1") == 0
    record = sp.record(0)
    assert record is not None and record.state == RecordState.AVAILABLE and record.delivery_count == 1
    assert ("g", "m1") not in manager.sessions
    assert not manager.connection_closed("client-127.0.0.1:5000-1")  # once


def test_a_session_opened_again_on_another_connection_outlives_the_old_one() -> None:
    manager, sp = manager_holding("m1", "client-127.0.0.1:5000-1")
    # The client ends its session (final epoch) and opens a new one on a new connection.
    manager.begin_fetch(share_fetch("m1", -1), now_ms=1, connection_id="client-127.0.0.1:5000-1")
    manager.begin_fetch(share_fetch("m1", 0), now_ms=2, connection_id="client-127.0.0.1:5002-3")
    assert sp.acquire("m1", [(0, 9)], 10, 500, now_ms=2)
    assert not manager.connection_closed("client-127.0.0.1:5000-1")
    assert sp.acquired_by("m1") == 10 and ("g", "m1") in manager.sessions


def test_a_session_without_a_connection_is_never_closed_by_one() -> None:
    manager, sp = manager_holding("m1", "")
    assert not manager.connection_closed("")
    assert sp.acquired_by("m1") == 10
