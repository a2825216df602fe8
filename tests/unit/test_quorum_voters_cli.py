"""``pykraft metadata-quorum add-controller | remove-controller``: Kafka's arguments and refusals
(MetadataQuorumCommand), and what add-controller reads from the new controller's own files. The voter
changes against a live quorum are in tests/interop/test_dynamic_quorum.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pykraft.cli import main
from pykraft.core.uuid import uuid_to_str
from pykraft.storage.ensemble import meta_properties_path

DIRECTORY_ID = uuid.UUID(int=0xABC)


def _controller(tmp_path: Path, *, started: bool) -> str:
    data = tmp_path / "controller-4"
    data.mkdir()
    if started:  # what a controller's first start writes (node.id, directory.id)
        Path(meta_properties_path(str(data))).write_text(
            f"version=1\ncluster.id=VTqhQKlqY06x0mYKovjF4g\nnode.id=4\ndirectory.id={uuid_to_str(DIRECTORY_ID)}\n",
            encoding="latin-1",
        )
    config = tmp_path / "controller-4.properties"
    config.write_text(
        "node.id=4\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:19094\n"
        "controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers=127.0.0.1:19091,127.0.0.1:19092\n"
        f"log.dirs={data}\n",
        encoding="utf-8",
    )
    return str(config)


def test_add_controller_dry_run_names_the_controllers_id_directory_id_and_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _controller(tmp_path, started=True)
    args = ["metadata-quorum", "--bootstrap-controller", "127.0.0.1:1", "--command-config", config]
    assert main([*args, "add-controller", "--dry-run"]) == 0
    assert capsys.readouterr().out == (
        f"DRY RUN of adding controller 4 with directory id {uuid_to_str(DIRECTORY_ID)} and endpoints: "
        "CONTROLLER://127.0.0.1:19094\n"
    )


def test_add_controller_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metadata-quorum", "--bootstrap-controller", "127.0.0.1:1", "add-controller"]) == 2
    assert "You must supply the configuration file of the controller" in capsys.readouterr().err
    never_started = _controller(tmp_path, started=False)
    args = ["metadata-quorum", "--bootstrap-controller", "127.0.0.1:1", "--command-config", never_started]
    assert main([*args, "add-controller"]) == 1
    assert "Unable to read meta.properties from" in capsys.readouterr().err


def test_remove_controller_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["metadata-quorum", "--bootstrap-controller", "127.0.0.1:1", "remove-controller"]
    assert (
        main(
            [
                *args,
                "--controller-id",
                "2",
                "--controller-directory-id",
                uuid_to_str(DIRECTORY_ID),
                "--dry-run",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == (
        f"DRY RUN of removing  KRaft controller 2 with directory id {uuid_to_str(DIRECTORY_ID)}\n"
    )
    assert main([*args, "--controller-id", "-1", "--controller-directory-id", uuid_to_str(DIRECTORY_ID)]) == 2
    assert "Invalid negative --controller-id: -1" in capsys.readouterr().err
    assert main([*args, "--controller-id", "2", "--controller-directory-id", "nope"]) == 2
    assert "Failed to parse --controller-directory-id" in capsys.readouterr().err
