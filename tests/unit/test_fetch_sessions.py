"""KIP-227 fetch sessions between brokers (issue 29 item 4): the leader's FetchSessionCache and the
follower's FollowerFetchSession, alone and against each other."""

from __future__ import annotations

import random

import pytest
from kafka.protocol.consumer import FetchRequest

from pykraft.broker.fetch_sessions import (
    FINAL_EPOCH,
    FetchSessionCache,
    FollowerFetch,
    FollowerFetchSession,
    PartitionFetch,
    SessionContext,
    next_epoch,
)
from pykraft.core.errors import ErrorCode
from pykraft.io.replica_fetcher import REPLICA_FETCH_VERSION, replica_fetch_request
from pykraft.protocol.fetch import FetchPartitionResponse, FetchResponseData, FetchTopicResponse

REPLICA = 2


def _fetch(index: int, offset: int, epoch: int = 1) -> PartitionFetch:
    return PartitionFetch(index, epoch, offset, epoch, 0, 1 << 20)


def _request(fetch: FollowerFetch, replica_id: int = REPLICA) -> FetchRequest:
    """The FetchRequest v12 a follower sends for ``fetch``, encoded and decoded as the leader sees it."""
    request = replica_fetch_request(fetch, replica_id, 500)
    return FetchRequest.decode(request.encode(version=REPLICA_FETCH_VERSION), version=REPLICA_FETCH_VERSION)


def _served(context: SessionContext) -> dict[tuple[str, int], PartitionFetch]:
    assert context.request is not None
    return {(t.topic, p.partition): p for t in context.request.topics for p in t.partitions}


def _answer(
    context: SessionContext, high_watermarks: dict[tuple[str, int], int], records: frozenset[tuple[str, int]]
) -> FetchResponseData:
    """The leader's answer to every served partition: records for those in ``records``."""
    by_topic: dict[str, list[FetchPartitionResponse]] = {}
    for (topic, index), _ in _served(context).items():
        by_topic.setdefault(topic, []).append(
            FetchPartitionResponse(
                index,
                ErrorCode.NONE,
                high_watermarks.get((topic, index), 0),
                high_watermarks.get((topic, index), 0),
                0,
                [b"batch"] if (topic, index) in records else [],
            )
        )
    full = FetchResponseData(0, ErrorCode.NONE, 0, [FetchTopicResponse(t, ps) for t, ps in by_topic.items()])
    return FetchSessionCache.answer(context, full)


def _named(response: FetchResponseData) -> set[tuple[str, int]]:
    return {(t.topic, p.partition_index) for t in response.topics for p in t.partitions}


def test_a_session_is_created_filled_in_and_answered_with_what_changed() -> None:
    cache = FetchSessionCache()
    follower = FollowerFetchSession()
    wanted = {("t", 0): _fetch(0, 10), ("t", 1): _fetch(1, 20), ("u", 0): _fetch(0, 5)}
    first = follower.build(wanted)
    assert (first.session_id, first.session_epoch, len(first.partitions)) == (0, 0, 3)
    context = cache.context(_request(first))
    assert _served(context) == wanted and not context.incremental
    response = _answer(context, {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}, frozenset())
    assert response.session_id != 0 and _named(response) == set(wanted)  # a full answer names all
    follower.answered(response.error_code, response.session_id)
    assert (follower.session_id, follower.epoch) == (response.session_id, 1)

    # Only t-1 moved: the fetch names it alone, the leader serves all three, answers what is new.
    wanted[("t", 1)] = _fetch(1, 25)
    second = follower.build(wanted)
    assert second.partitions == [("t", _fetch(1, 25))] and second.forgotten == []
    context = cache.context(_request(second))
    assert context.incremental and _served(context) == wanted
    response = _answer(context, {("t", 0): 10, ("t", 1): 25, ("u", 0): 7}, frozenset({("t", 1)}))
    assert _named(response) == {("t", 1), ("u", 0)}  # records; a moved high watermark
    follower.answered(response.error_code, response.session_id)

    # Nothing moved: an empty fetch, an empty answer. Then u-0 is no longer followed: forgotten.
    third = follower.build(wanted)
    assert third.partitions == [] and third.session_epoch == 2
    context = cache.context(_request(third))
    assert _named(_answer(context, {("t", 0): 10, ("t", 1): 25, ("u", 0): 7}, frozenset())) == set()
    follower.answered(ErrorCode.NONE, context.session.session_id if context.session else 0)
    del wanted[("u", 0)]
    fourth = follower.build(wanted)
    assert fourth.partitions == [] and fourth.forgotten == [("u", 0)]
    assert _served(cache.context(_request(fourth))) == wanted


def test_session_metadata_out_of_turn_is_refused_and_the_follower_starts_over() -> None:
    cache = FetchSessionCache()
    follower = FollowerFetchSession()
    wanted = {("t", 0): _fetch(0, 1)}
    context = cache.context(_request(follower.build(wanted)))
    assert context.session is not None
    session_id = context.session.session_id
    follower.answered(ErrorCode.NONE, session_id)

    stale = follower.build(wanted)  # epoch 1
    assert cache.context(_request(stale)).error_code == ErrorCode.NONE
    # The same epoch again (an answer the follower never got): out of turn.
    replay = cache.context(_request(stale))
    assert (replay.request, replay.error_code) == (None, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    # Another broker naming this session, or a session the leader does not have: not found.
    assert cache.context(_request(stale, replica_id=3)).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    gone = FollowerFetch(session_id + 7, 1, [], [])
    assert cache.context(_request(gone)).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    # The follower, told its epoch is out of turn, closes the session with a full fetch.
    follower.answered(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    again = follower.build(wanted)
    assert (again.session_id, again.session_epoch, again.partitions) == (session_id, 0, [("t", _fetch(0, 1))])
    context = cache.context(_request(again))
    assert context.session is not None and context.session.session_id != session_id and len(cache) == 1
    # Told the session is not found, it asks for a new one.
    follower.answered(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (follower.session_id, follower.epoch) == (0, 0)


def test_a_final_epoch_fetch_is_sessionless_and_the_cache_keeps_the_most_recently_used() -> None:
    cache = FetchSessionCache(slots=2)
    sessionless = cache.context(_request(FollowerFetch(0, FINAL_EPOCH, [("t", _fetch(0, 3))], [])))
    assert sessionless.session is None and _served(sessionless) == {("t", 0): _fetch(0, 3)}
    response = FetchResponseData(0, ErrorCode.NONE, 0, [])
    assert FetchSessionCache.answer(sessionless, response) is response
    ids = []
    for replica_id in (2, 3, 4):
        fetch = FollowerFetch(0, 0, [("t", _fetch(0, 3))], [])
        context = cache.context(_request(fetch, replica_id=replica_id))
        assert context.session is not None
        ids.append(context.session.session_id)
    assert len(set(ids)) == 3 and len(cache) == 2
    # The first session was the least recently used: it went to make room.
    gone = cache.context(_request(FollowerFetch(ids[0], 1, [], []), replica_id=2))
    assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert (
        cache.context(_request(FollowerFetch(ids[2], 1, [], []), replica_id=4)).error_code == ErrorCode.NONE
    )
    # A broker's new session (it restarted) replaces its old one: no stale session holds a slot.
    again = cache.context(_request(FollowerFetch(0, 0, [("t", _fetch(0, 3))], []), replica_id=4))
    assert again.session is not None and len(cache) == 2
    stale = cache.context(_request(FollowerFetch(ids[2], 2, [], []), replica_id=4))
    assert stale.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert next_epoch(0x7FFFFFFF) == 1 and next_epoch(FINAL_EPOCH) == FINAL_EPOCH


@pytest.mark.parametrize("seed", range(20))
def test_the_leader_always_serves_what_the_follower_wants(seed: int) -> None:
    """Random follower histories (partitions followed and forgotten, offsets moving, answers lost on
    the way back): whenever the leader accepts a fetch it serves exactly the partitions, at exactly the
    positions, the follower wants."""
    rng = random.Random(seed)
    cache = FetchSessionCache()
    follower = FollowerFetchSession()
    wanted: dict[tuple[str, int], PartitionFetch] = {}
    accepted = 0
    for _ in range(300):
        for _ in range(rng.randrange(3)):
            key = (rng.choice("ab"), rng.randrange(6))
            if key in wanted and rng.random() < 0.3:
                del wanted[key]
            else:
                offset = (
                    wanted[key].fetch_offset + rng.randrange(1, 9) if key in wanted else rng.randrange(50)
                )
                wanted[key] = _fetch(key[1], offset, epoch=rng.randrange(1, 3))
        context = cache.context(_request(follower.build(wanted)))
        if context.request is None:
            follower.answered(context.error_code, 0)
            continue
        accepted += 1
        assert _served(context) == wanted, f"SEED={seed}"
        response = _answer(context, {}, frozenset())
        if rng.random() < 0.1:
            follower.failed()  # the answer was lost on the way
        else:
            follower.answered(response.error_code, response.session_id)
    assert accepted > 250
