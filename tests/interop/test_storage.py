"""KIP-1262 end to end with real processes: no format step, the cluster id from the metadata log, the
storage tool, and refusals that name both ids and the directory and change nothing on disk."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from pykraft.testing import free_port, node_properties
from tests.interop.test_confluent import consume_all
from tests.interop.test_restart import _start_server
from tests.unit.test_meta_properties_files import snapshot_tree

pytestmark = pytest.mark.slow


def _pykraft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft.cli", *args], capture_output=True, text=True, timeout=60
    )


def _config(tmp_path: Path, port: int, *, two_dirs: bool) -> Path:
    text = node_properties(str(tmp_path / "a"), port, free_port())
    if two_dirs:
        text = text.replace(f"log.dirs={tmp_path / 'a'}", f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}")
        text += f"metadata.log.dir={tmp_path / 'c'}\n"
    path = tmp_path / "server.properties"
    path.write_text(text)
    return path


def _props(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def _cluster_id_seen_by_clients(port: int) -> str:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    cluster_id: str = admin.list_topics(timeout=15).cluster_id
    return cluster_id


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def test_never_formatted__serves__v2_everywhere__restart_keeps_id__edited_dir_refuses(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port, two_dirs=True)
    proc = _start_server(str(config), port)
    try:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("t", value=b"no format step")
        assert producer.flush(30) == 0
        assert [m.value() for m in consume_all(f"127.0.0.1:{port}", "t", 0, 1)] == [b"no format step"]
        seen = _cluster_id_seen_by_clients(port)
    finally:
        _stop(proc)
    metas = {d: _props(tmp_path / d / "meta.properties") for d in "abc"}
    assert {m["version"] for m in metas.values()} == {"2"}
    assert {m["node.id"] for m in metas.values()} == {"1"}
    assert {m["cluster.id"] for m in metas.values()} == {seen}
    assert len(seen) == 22 and not seen.startswith("-")
    assert len({m["directory.id"] for m in metas.values()}) == 3

    proc = _start_server(str(config), port)
    try:
        assert _cluster_id_seen_by_clients(port) == seen
    finally:
        _stop(proc)

    # Another cluster's id in one dir: refuse, name both ids and the dir, change nothing.
    edited = tmp_path / "b" / "meta.properties"
    edited.write_text(edited.read_text().replace(f"cluster.id={seen}", "cluster.id=OtherClusterIdAAAAAAAAA"))
    before = snapshot_tree(tmp_path)
    refused = _pykraft("server", "start", "--config", str(config))
    assert refused.returncode != 0
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("pykraft: Invalid cluster.id in: ")
    assert seen in line and "OtherClusterIdAAAAAAAAA" in line and str(edited) in line
    assert snapshot_tree(tmp_path) == before


def test_format_with_cluster_id__then_start__clients_see_it__format_twice_is_an_error(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port, two_dirs=False)
    formatted = _pykraft("storage", "format", "--config", str(config), "--cluster-id", "MyClusterId")
    assert formatted.returncode == 0, formatted.stderr
    assert formatted.stdout.startswith(
        f"Formatting metadata directory {tmp_path / 'a'} with metadata.version"
    )

    again = _pykraft("storage", "format", "--config", str(config), "--cluster-id", "MyClusterId")
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [
        f"pykraft storage: Log directory {tmp_path / 'a'} is already formatted. Use --ignore-formatted to "
        "ignore this directory and format the others."
    ]
    ignored = _pykraft("storage", "format", "-c", str(config), "-t", "MyClusterId", "--ignore-formatted")
    assert (ignored.returncode, ignored.stdout) == (0, "All of the log directories are already formatted.\n")

    proc = _start_server(str(config), port)
    try:
        assert _cluster_id_seen_by_clients(port) == "MyClusterId"
    finally:
        _stop(proc)
    assert _props(tmp_path / "a" / "meta.properties")["cluster.id"] == "MyClusterId"

    info = _pykraft("storage", "info", "--config", str(config))
    assert info.returncode == 0, info.stdout
    assert "Found metadata in" in info.stdout and "cluster.id=MyClusterId" in info.stdout
    assert "Found cluster id MyClusterId in the metadata log" in info.stdout


def test_random_uuid_and_one_line_errors(tmp_path: Path) -> None:
    out = _pykraft("storage", "random-uuid")
    assert out.returncode == 0 and len(out.stdout.strip()) == 22
    missing = _pykraft("storage", "format", "--config", str(tmp_path / "nope.properties"))
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"pykraft storage: --config: cannot read {tmp_path / 'nope.properties'}: No such file or directory"
    ]
    config = _config(tmp_path, free_port(), two_dirs=False)
    old = _pykraft("storage", "format", "--config", str(config), "--release-version", "3.4-IV0")
    assert old.returncode == 1 and old.stderr.startswith(
        "pykraft storage: --release-version: metadata.version"
    )
    assert list(tmp_path.iterdir()) == [config]  # nothing written
