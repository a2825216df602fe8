"""Offsets as the Spark Kafka source spells them, and the planning arithmetic (no Spark, no sockets).

Offsets are per-partition JSON: ``{"topic": {"0": 23, "1": -2}}`` where -2 means earliest and -1 means
latest (in ``startingOffsets``/``endingOffsets`` only; the checkpoint always holds real offsets). Keys
are strings because Spark round-trips streaming offsets through JSON (pyspark-facts.md §3.6).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


class OptionError(ValueError):
    """A source/sink option is missing or malformed; the message names the option and the value."""


class Options(dict[str, str]):
    """Option strings with case-insensitive names, as Spark gives them; a plain dict underneath, so
    it pickles to executors (Spark's own CaseInsensitiveDict lower-cases keys, and ``dict()`` of it
    would lose the insensitivity)."""

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__({str(k).lower(): str(v) for k, v in (options or {}).items()})

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name}: {raw!r} is not true or false")


def parse_int(options: Mapping[str, str], name: str, default: int | None, *, minimum: int = 0) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name}: {raw!r} is not an integer") from None
    if value < minimum:
        raise OptionError(f"option {name}: {value} is below the minimum {minimum}")
    return value


@dataclass(frozen=True)
class Subscription:
    """Exactly one of subscribe / subscribePattern / assign, as Spark requires."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def select(self, available: Mapping[str, list[int]]) -> list[TopicPartition]:
        """Topic partitions to read, given partitions per topic the broker knows."""
        if self.assigned:
            return sorted(self.assigned)
        if self.pattern is not None:
            rx = re.compile(self.pattern)
            names = [t for t in available if rx.fullmatch(t)]
        else:
            names = list(self.topics)
        return sorted((t, p) for t in names for p in available.get(t, []))


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options subscribe, subscribePattern, assign must be set; "
            f"got {', '.join(given) or 'none'}"
        )
    key = given[0]
    raw = str(options[key])
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError(f"option subscribe: {raw!r} names no topic")
        return Subscription(topics=topics)
    if key == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(
                f"option subscribePattern: {raw!r} is not a regular expression: {exc}"
            ) from None
        return Subscription(pattern=raw)
    try:
        parsed = json.loads(raw)
        assigned = tuple((str(t), int(p)) for t, parts in parsed.items() for p in parts)
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f'option assign: {raw!r} is not JSON like {{"topic":[0,1]}}') from None
    if not assigned:
        raise OptionError(f"option assign: {raw!r} names no partition")
    return Subscription(assigned=assigned)


def parse_offsets_spec(name: str, raw: str | None, default: str) -> str | Offsets:
    """``earliest``, ``latest`` or per-partition JSON (values may be -2/-1)."""
    text = (raw if raw is not None else default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed = json.loads(text)
        out = {(str(t), int(p)): int(o) for t, parts in parsed.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f'option {name}: {text!r} is not earliest, latest or JSON like {{"topic":{{"0":23}}}}'
        ) from None
    for tp, off in out.items():
        if off < EARLIEST:
            raise OptionError(f"option {name}: offset {off} for {tp[0]}-{tp[1]} is below -2 (earliest)")
    return out


def resolve(
    spec: str | Offsets,
    partitions: Iterable[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> Offsets:
    """Real offsets per partition; a partition the JSON does not name gets the spec's default
    (Spark: a JSON spec must name every partition; here unnamed ones start at earliest)."""
    out: Offsets = {}
    for tp in partitions:
        if spec == "earliest":
            out[tp] = earliest[tp]
        elif spec == "latest":
            out[tp] = latest[tp]
        else:
            assert isinstance(spec, dict)
            off = spec.get(tp, EARLIEST)
            out[tp] = earliest[tp] if off == EARLIEST else latest[tp] if off == LATEST else off
    return out


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def from_json(data: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    if not data:
        return {}
    return {(str(t), int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


def admit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int | None
) -> Offsets:
    """End offsets for the next micro-batch. With ``max_rows``, the budget is shared in proportion to
    each partition's backlog, as Spark's Kafka source does for maxOffsetsPerTrigger; every partition
    with a backlog gets at least one record so a small budget still makes progress."""
    end = {tp: max(latest.get(tp, start.get(tp, 0)), start.get(tp, 0)) for tp in set(latest) | set(start)}
    if max_rows is None:
        return end
    backlog = {tp: end[tp] - start.get(tp, 0) for tp in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return end
    budget = max_rows
    out: Offsets = {}
    for tp in sorted(end):
        lag = backlog[tp]
        take = min(lag, max(1 if lag else 0, lag * max_rows // total))
        take = min(take, budget)
        budget -= take
        out[tp] = start.get(tp, 0) + take
    # Integer rounding leaves part of the budget unused; hand it out in partition order.
    for tp in sorted(end):
        if budget <= 0:
            break
        extra = min(end[tp] - out[tp], budget)
        out[tp] += extra
        budget -= extra
    return out


@dataclass(frozen=True)
class Range:
    topic: str
    partition: int
    start: int
    end: int  # exclusive


def split_ranges(ranges: list[Range], min_partitions: int | None, max_records: int) -> list[Range]:
    """One range per topic partition, split so none holds more than ``max_records`` offsets and there
    are at least ``min_partitions`` ranges (largest ranges split first, as Spark's KafkaOffsetRangeCalculator)."""
    out: list[Range] = []
    for r in ranges:
        n = r.end - r.start
        if n <= 0:
            continue
        pieces = max(1, -(-n // max_records))
        out.extend(_cut(r, pieces))
    if min_partitions and len(out) < min_partitions:
        total = sum(r.end - r.start for r in out)
        result: list[Range] = []
        for r in out:
            share = (r.end - r.start) * min_partitions / total if total else 1
            result.extend(_cut(r, max(1, round(share))))
        out = result
    return out


def _cut(r: Range, pieces: int) -> list[Range]:
    n = r.end - r.start
    pieces = min(pieces, n)
    step, extra = divmod(n, pieces)
    out = []
    s = r.start
    for i in range(pieces):
        e = s + step + (1 if i < extra else 0)
        out.append(Range(r.topic, r.partition, s, e))
        s = e
    return out
