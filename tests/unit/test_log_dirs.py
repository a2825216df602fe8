"""Partitions across several log dirs (issue 18, Kafka's LogManager with JBOD): a log found on disk
stays in its dir, a new one goes to the online dir with the fewest partitions, ties by log.dirs order."""

from __future__ import annotations

import os
from pathlib import Path

from pykraft.io.log_dirs import FileLogOpener, next_log_dir
from pykraft.log.partition_log import LogConfig


def test_next_log_dir__fewest_partitions_then_order_and_never_an_offline_dir() -> None:
    dirs = ("/a", "/b", "/c")
    assert next_log_dir(dirs, {}, ()) == "/a"
    assert next_log_dir(dirs, {"/a": 1}, ()) == "/b"
    assert next_log_dir(dirs, {"/a": 2, "/b": 1, "/c": 1}, ()) == "/b"
    assert next_log_dir(dirs, {"/a": 0, "/b": 5}, {"/a"}) == "/c"
    assert next_log_dir(dirs, {}, set(dirs)) is None


def test_file_log_opener__places_by_count_and_finds_each_log_where_it_is(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    opener = FileLogOpener([a, b, a])  # a repeated dir counts once
    assert opener.log_dirs == (a, b)
    placed = {}
    for topic in ("t", "u", "v"):
        log_dir = opener.log_dir_for(topic, 0, ())
        assert log_dir is not None
        opener.open_log(log_dir, topic, 0, LogConfig()).close()
        placed[topic] = log_dir
    assert placed == {"t": a, "u": b, "v": a}
    assert os.path.isdir(os.path.join(b, "u-0"))
    # Another start: each log is found in its dir; a new one is placed by what is on disk (a holds
    # two, b one), even before any log was opened, and never in an offline dir.
    os.makedirs(os.path.join(a, "__cluster_metadata-0"))  # the metadata log is not a partition
    again = FileLogOpener([b, a])
    assert again.log_dir_for("w", 0, ()) == b
    assert [again.log_dir_for(t, 0, ()) for t in ("v", "u", "t")] == [a, b, a]
    opener.open_log(b, "w", 0, LogConfig()).close()
    assert FileLogOpener([a, b]).log_dir_for("x", 0, ()) == a  # two each: ties by log.dirs order
    assert again.log_dir_for("x", 0, {b}) == a
    # Found in an offline dir: still that dir (the replica manager keeps the partition offline).
    assert again.log_dir_for("t", 0, {a}) == a
    again.delete_log("u", 0)
    assert not os.path.exists(os.path.join(b, "u-0"))
