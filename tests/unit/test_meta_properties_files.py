"""meta.properties on disk and KIP-1262 at node start (kafka-facts.md §8.17 item 161): files written
atomically, startup refusals that change nothing, the cluster id read from the metadata log, and the
publisher that persists a discovered cluster id before anything in memory sees it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from pathlib import Path

import pytest

from pykraft.controller.quorum_controller import QuorumController
from pykraft.core.config import load_config
from pykraft.io import meta_properties_files as files
from pykraft.io.meta_properties_files import (
    ClusterIdPublisher,
    find_cluster_id,
    load_ensemble,
    prepare_log_dirs,
    read_logged_cluster_id,
    write_meta_properties,
)
from pykraft.io.node import Node, StartupError
from pykraft.metadata.records import encode_metadata_record
from pykraft.raft.control import LeaderChangeMessage, leader_change_record
from pykraft.raft.log import build_leader_batch
from pykraft.storage.meta_properties import MetaProperties, MetaPropertiesError, MetaPropertiesVersion
from pykraft.testing import free_port, node_properties

V1, V2 = MetaPropertiesVersion.V1, MetaPropertiesVersion.V2


def snapshot_tree(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root``: relative name -> (size, sha256); directories as (-1, '')."""
    out: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (-1, "")
        for name in filenames:
            path = os.path.join(dirpath, name)
            data = Path(path).read_bytes()
            out[os.path.relpath(path, root)] = (len(data), hashlib.sha256(data).hexdigest())
    return out


# --- files --------------------------------------------------------------------------------------


def test_write_then_load__round_trip_and_no_temp_file_left(tmp_path: Path) -> None:
    meta = MetaProperties(V2, "my@cluster@id", 3, None)
    write_meta_properties(str(tmp_path / "a"), meta)  # creates the dir
    write_meta_properties(str(tmp_path / "a"), meta.with_cluster_id("other"))  # replaces atomically
    assert sorted(os.listdir(tmp_path / "a")) == ["meta.properties"]
    ensemble = load_ensemble([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "a"))
    assert ensemble.log_dir_props == {str(tmp_path / "a"): meta.with_cluster_id("other")}
    assert ensemble.empty_log_dirs == {str(tmp_path / "b")}


def test_load__unreadable_and_not_a_directory_are_errors(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "meta.properties").write_text("version=9\n")
    (tmp_path / "file").write_text("x")
    ensemble = load_ensemble([str(tmp_path / "bad"), str(tmp_path / "file")], str(tmp_path / "bad"))
    assert ensemble.error_log_dirs == {
        str(tmp_path / "bad"): "Unknown meta.properties version number 9",
        str(tmp_path / "file"): f"{tmp_path / 'file'} is not a directory",
    }


# --- the cluster id in the metadata log ------------------------------------------------------------


def _metadata_batches() -> list[bytes]:
    leader_change = build_leader_batch(
        [leader_change_record(LeaderChangeMessage(1, (1,), (1,)))],
        base_offset=0,
        epoch=1,
        now_ms=0,
        is_control=True,
    )
    records = QuorumController(rng=random.Random(0)).bootstrap_records(cluster_id="zd2vLVrZQlCLJj8-k7A10w")
    data = build_leader_batch(
        [encode_metadata_record(r) for r in records], base_offset=1, epoch=1, now_ms=0, is_control=False
    )
    return [bytes(leader_change), bytes(data)]


def test_find_cluster_id__skips_control_batches_and_other_records() -> None:
    assert find_cluster_id(_metadata_batches()) == "zd2vLVrZQlCLJj8-k7A10w"
    assert find_cluster_id(_metadata_batches()[:1]) is None


def test_read_logged_cluster_id__from_segment_files_read_in_chunks(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(files, "_READ_CHUNK_BYTES", 7)  # batches straddle every read
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    assert read_logged_cluster_id(str(tmp_path)) is None
    data = b"".join(_metadata_batches())
    (part / "00000000000000000000.log").write_bytes(data[: len(data) - 3])  # torn tail: nothing found
    assert read_logged_cluster_id(str(tmp_path)) is None
    (part / "00000000000000000000.log").write_bytes(data + b"\x00" * 5)
    assert read_logged_cluster_id(str(tmp_path)) == "zd2vLVrZQlCLJj8-k7A10w"
    assert read_logged_cluster_id(str(tmp_path / "missing")) is None


# --- startup (161: a missing meta.properties is written as V2) --------------------------------------


def test_prepare__never_formatted__writes_v2_everywhere(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    publisher = prepare_log_dirs(dirs, str(tmp_path / "m"), 4, random.Random(1))
    ensemble = load_ensemble(dirs, str(tmp_path / "m"))
    assert ensemble.empty_log_dirs == frozenset() and len(ensemble.log_dir_props) == 3
    assert {(m.version, m.node_id, m.cluster_id) for m in ensemble.log_dir_props.values()} == {(V2, 4, None)}
    assert publisher.cluster_id is None
    # A restart writes nothing: every dir is complete.
    before = snapshot_tree(tmp_path)
    prepare_log_dirs(dirs, str(tmp_path / "m"), 4, random.Random(2))
    assert snapshot_tree(tmp_path) == before


def test_prepare__refusal_changes_nothing_on_disk(tmp_path: Path) -> None:
    write_meta_properties(str(tmp_path / "a"), MetaProperties(V2, "X", 4, None))
    write_meta_properties(str(tmp_path / "b"), MetaProperties(V2, "Y", 4, None))
    (tmp_path / "m").mkdir()
    before = snapshot_tree(tmp_path)
    with pytest.raises(MetaPropertiesError) as info:
        prepare_log_dirs([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"), 4, random.Random(1))
    assert "Expected X" in str(info.value) and "read Y" in str(info.value)
    assert str(tmp_path / "b" / "meta.properties") in str(info.value)
    assert snapshot_tree(tmp_path) == before


# --- the publisher (161: persisted to every meta.properties before it is exposed) ---------------------


def test_publisher__persists_before_exposing(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    dirs = [str(tmp_path / "a"), str(tmp_path / "m")]
    publisher = prepare_log_dirs(dirs, str(tmp_path / "m"), 1, random.Random(1))
    real_write = files.write_meta_properties
    calls: list[str] = []

    def failing_second_write(log_dir: str, meta: MetaProperties) -> None:
        calls.append(log_dir)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_write(log_dir, meta)

    monkeypatch.setattr(files, "write_meta_properties", failing_second_write)
    with pytest.raises(OSError):
        publisher.publish("C")
    assert publisher.cluster_id is None  # not exposed: one file does not carry it yet
    monkeypatch.setattr(files, "write_meta_properties", real_write)
    assert publisher.publish("C") == "C"
    assert {m.cluster_id for m in load_ensemble(dirs, str(tmp_path / "m")).log_dir_props.values()} == {"C"}
    assert publisher.publish("C") == "C" and publisher.publish(None) == "C"
    with pytest.raises(files.ClusterIdConflictError, match="carries cluster id D"):
        publisher.publish("D")
    assert publisher.cluster_id == "C"


def test_publisher__mints_a_22_character_kafka_uuid_unless_one_is_persisted() -> None:
    rng = random.Random(5)
    minted = {ClusterIdPublisher({}).activation_cluster_id(rng) for _ in range(200)}
    assert len(minted) == 200
    assert all(len(m) == 22 and not m.startswith("-") for m in minted)
    persisted = ClusterIdPublisher({"/m": MetaProperties(V2, "X", 1)})
    assert persisted.activation_cluster_id(rng) == "X" and persisted.cluster_id == "X"


# --- a real node in process -----------------------------------------------------------------------


def _config(data_dir: Path, **overrides: str):  # type: ignore[no-untyped-def]
    return load_config(node_properties(str(data_dir), free_port(), free_port()), overrides)


def _run(node: Node, check=None):  # type: ignore[no-untyped-def]
    async def main() -> None:
        try:
            await node.start()
            if check is not None:
                check()
        finally:
            await node.stop()

    asyncio.run(main())


def test_node__first_start_mints_persists_then_exposes_and_tells_raft(tmp_path: Path) -> None:
    config = _config(tmp_path / "d", **{"metadata.log.dir": str(tmp_path / "m")})
    node = Node(config)
    seen: list[tuple[str | None, set[str | None]]] = []
    original = node._on_image

    def on_image() -> None:
        if node.metadata is not None:
            on_disk = load_ensemble(config.log_dirs, config.metadata_log_dir).log_dir_props.values()
            seen.append((node.metadata.cluster_view().cluster_id, {m.cluster_id for m in on_disk}))
        original()

    node._on_image = on_image  # type: ignore[method-assign]

    def check() -> None:
        assert node.metadata is not None and node.metadata.raft is not None
        assert node.ctx is not None and node.ctx.cluster.cluster_id is not None
        assert node.metadata.raft.cluster_id == node.ctx.cluster.cluster_id

    _run(node, check)
    exposed = [cid for cid, _ in seen if cid is not None]
    assert exposed, "the cluster id reached the broker's view"
    cluster_id = exposed[0]
    assert len(cluster_id) == 22
    # Persist-before-use: whenever the view carried the id, every meta.properties already did.
    assert all(disk == {cid} for cid, disk in seen if cid is not None)
    # Restart: same id, from meta.properties and the log.
    node2 = Node(config)
    _run(node2, lambda: None)
    assert node2.metadata is not None and node2.metadata.cluster_id == cluster_id
    assert read_logged_cluster_id(str(tmp_path / "m")) == cluster_id


def test_node__log_without_cluster_id_record_gets_one_at_next_start(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    config = _config(tmp_path / "d")
    # A log bootstrapped before pykraft wrote ClusterIdRecords: activation with no id.
    monkeypatch.setattr(ClusterIdPublisher, "activation_cluster_id", lambda self, rng: None)
    _run(Node(config))
    assert read_logged_cluster_id(str(tmp_path / "d")) is None
    monkeypatch.undo()
    node = Node(config)
    _run(node)
    logged = read_logged_cluster_id(str(tmp_path / "d"))
    assert logged is not None and len(logged) == 22
    assert load_ensemble(config.log_dirs, config.metadata_log_dir).cluster_id() == logged


def test_node__persisted_id_differs_from_the_log__refuses_and_changes_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path / "d")
    _run(Node(config))
    path = tmp_path / "d" / "meta.properties"
    logged = read_logged_cluster_id(str(tmp_path / "d"))
    path.write_text(path.read_text().replace(f"cluster.id={logged}", "cluster.id=someoneElse"))
    before = snapshot_tree(tmp_path)
    with pytest.raises(StartupError) as info:
        _run(Node(config))
    message = str(info.value)
    assert "someoneElse" in message and str(logged) in message and str(path) in message
    assert snapshot_tree(tmp_path) == before


def test_node__formatted_cluster_id_is_used(tmp_path: Path) -> None:
    config = _config(tmp_path / "d")
    write_meta_properties(str(tmp_path / "d"), MetaProperties(V1, "my@cluster@id", 1, None))
    node = Node(config)
    _run(node, lambda: None)
    assert node.metadata is not None and node.metadata.cluster_id == "my@cluster@id"
    assert read_logged_cluster_id(str(tmp_path / "d")) == "my@cluster@id"
    (meta,) = load_ensemble(config.log_dirs, config.metadata_log_dir).log_dir_props.values()
    assert meta.version == V1 and meta.directory_id is not None  # V1 kept, directory.id added
