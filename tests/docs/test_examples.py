"""Every code example in README.md and docs/*.md runs (issue 28), so an example cannot drift from what
works. tests/docs/examples.py says what each kind of block is; here:

- every block is runnable or marked ``<!-- example: not run — reason -->`` (few are);
- ``properties`` blocks load with pykraft's config loader, and a key it would ignore is a failure;
  ``json`` blocks parse; ``meta.properties`` and ``quorum-state`` blocks parse with pykraft's readers;
- per file, its ``python`` and ``sh`` blocks run in order against ONE running node (shared by every
  file), in a fresh working directory per file holding the file's ``file NAME`` blocks. Python runs in
  one namespace per file; sh runs under bash with ``pykraft`` this checkout's CLI. The node's address
  replaces ``127.0.0.1:9092`` and ``H:P``, its controller listener ``127.0.0.1:9093``, and in commands
  ``data/`` and ``./data`` are its data dir. A block must finish without error (exit 0).

The node runs Kafka's StandardAuthorizer with the anonymous PLAINTEXT principal as super user, so the
ACL examples have an authorizer to talk to and every other example is allowed everything.
Spark blocks run in tests/spark/test_docs_examples.py, in the Spark tests' session.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.core.config import load_config
from pykraft.raft.quorum_state import decode_quorum_state, encode_quorum_state
from pykraft.storage.meta_properties import format_meta_properties, parse_meta_properties
from pykraft.testing import RunningNode, running_node
from tests.docs.examples import (
    DOCS,
    ROOT,
    Block,
    all_blocks,
    blocks,
    problems,
    with_addresses,
    with_data_dir,
)

MAX_NOT_RUN = 6  # marks stay few: a block CI cannot run is the exception
COMMAND_BOUND_S = 120  # a hung command fails the test instead of hanging CI; examples take seconds


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_block_runs_or_says_why_not() -> None:
    everything = all_blocks()
    found = [f"{block.where}: {problem}" for block in everything for problem in problems(block)]
    assert not found, "\n".join(found)
    not_run = [f"{block.where}: {block.not_run_reason}" for block in everything if block.not_run_reason]
    assert len(not_run) <= MAX_NOT_RUN, "too many examples are not run:\n" + "\n".join(not_run)


@pytest.mark.parametrize(
    "block",
    [b for b in all_blocks() if b.language in ("properties", "json") and not b.not_run_reason],
    ids=lambda b: b.where,
)
def test_config_and_format_blocks_parse(block: Block) -> None:
    if block.mark == "meta.properties":
        meta = parse_meta_properties(block.code)
        assert format_meta_properties(meta) == block.code  # exactly what pykraft writes
    elif block.mark == "quorum-state":
        assert (
            encode_quorum_state(decode_quorum_state(block.code.strip().encode()))
            == block.code.strip().encode()
        )
    elif block.language == "properties":
        config = load_config(block.code)
        assert config.ignored == (), f"{block.where}: pykraft does not read {list(config.ignored)}"
    else:
        json.loads(block.code)


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    overrides = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        # A metadata snapshot within a second, for the examples that read one.
        "metadata.log.max.snapshot.interval.ms": "1000",
    }
    with running_node(overrides=overrides) as running:
        yield running


@pytest.fixture(scope="module")
def cli_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PATH whose ``pykraft`` is this checkout's CLI, served by tests/docs/cli_server.py (one import
    of the CLI, a fork per command)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    socket_path = str(bin_dir / "cli.sock")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.docs.cli_server", socket_path],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline() == "ready\n", (
            "the CLI server did not start"
        )
        shim = bin_dir / "pykraft"
        client = ROOT / "tests" / "docs" / "cli_server.py"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{client}" --client "{socket_path}" "$@"\n')
        shim.chmod(0o755)
        yield f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    finally:
        server.terminate()
        server.wait(timeout=COMMAND_BOUND_S)


def _pythonpath() -> str:
    return os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")]))


def _run_sh(block: Block, node: RunningNode, cwd: Path, path: str) -> None:
    code = with_data_dir(
        with_addresses(block.code, node.bootstrap_servers, node.controller_address), node.data_dir
    )
    env = {**os.environ, "PATH": path, "PYTHONPATH": _pythonpath()}
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_BOUND_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"{block.where}: exit {result.returncode}\n{code}\nstdout:\n{result.stdout[-2000:]}\n"
        f"stderr:\n{result.stderr[-2000:]}"
    )


def _run_python(block: Block, node: RunningNode, namespace: dict[str, object]) -> None:
    code = with_addresses(block.code, node.bootstrap_servers, node.controller_address)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, block.where, "exec"), namespace)  # the example is the test


def run_file_examples(path: Path, node: RunningNode, cli_path: str) -> list[Block]:
    """Run one file's node examples in order; return the blocks run."""
    ran = []
    namespace: dict[str, object] = {"__name__": f"example:{_doc_id(path)}"}
    with tempfile.TemporaryDirectory(prefix="pykraft-doc-") as work:
        for block in blocks(path):
            if block.file_name:
                (Path(work) / block.file_name).write_text(block.code)
            if block.not_run_reason or block.needs_spark or block.language not in ("python", "sh"):
                continue
            if block.language == "python":
                _run_python(block, node, namespace)
            else:
                _run_sh(block, node, Path(work), cli_path)
            ran.append(block)
    return ran


@pytest.mark.parametrize("path", DOCS, ids=_doc_id)
def test_examples_run_against_a_node(path: Path, node: RunningNode, cli_path: str) -> None:
    expected = [
        b
        for b in blocks(path)
        if b.language in ("python", "sh") and not b.not_run_reason and not b.needs_spark
    ]
    assert run_file_examples(path, node, cli_path) == expected
