"""The Spark examples of README.md and docs/*.md run as written (issue 28), in the Spark tests' one
session, against one running node: the python blocks that use ``spark`` (in order, one namespace per
file, ``spark`` the shared session) and the ``pykraft pipeline`` commands (the CLI's ``main`` in this
process, so they reuse the session instead of starting a JVM each; each gets ``--out`` a temp dir).
tests/docs/examples.py finds and
classifies the blocks; tests/docs/test_examples.py runs the others.

The examples read the topic ``events`` and write ``copy``: both exist with two partitions, ``events``
holding 50 records, before the first file runs. (The README's Spark example used to raise
UNSUPPORTED_DATA_SOURCE_SAVE_MODE, since Python data sources take only the Append and Overwrite save
modes.)
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.cli import main
from pykraft.testing import RunningNode, running_node
from tests.docs.examples import DOCS, ROOT, Block, blocks, commands, with_addresses, with_data_dir
from tests.spark.helpers import consume_all, create_topic, produce

EVENTS = [(b"k%d" % i, b"v%d" % i) for i in range(50)]


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as running:
        create_topic(running.bootstrap_servers, "events", 2)
        create_topic(running.bootstrap_servers, "copy", 2)
        produce(running.bootstrap_servers, "events", [(k, v, i % 2, None) for i, (k, v) in enumerate(EVENTS)])
        yield running


def _spark_blocks(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.needs_spark and not b.not_run_reason]


def _run(block: Block, node: RunningNode, spark: Any, namespace: dict[str, Any], out_root: Path) -> None:
    code = with_addresses(block.code, node.bootstrap_servers, node.controller_address)
    if block.language == "python":
        namespace.setdefault("spark", spark)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, block.where, "exec"), namespace)  # the example is the test
        return
    for words in commands(
        Block(block.path, block.line, block.language, with_data_dir(code, node.data_dir), "")
    ):
        assert words[:2] == ["pykraft", "pipeline"], f"{block.where}: {words}"
        # Spark resolves a relative --out against the JVM's working directory, not this process's:
        # each command writes into its own temp dir instead of the checkout.
        out = out_root / f"out-{block.line}-{len(list(out_root.iterdir()))}"
        with contextlib.redirect_stdout(io.StringIO()):
            status = main([*words[1:], "--out", str(out)])
        assert status == 0, f"{block.where}: {' '.join(words)} exited {status}"


@pytest.mark.parametrize(
    "path", [p for p in DOCS if _spark_blocks(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_spark_examples_run(path: Path, node: RunningNode, spark: Any, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": f"example:{path.name}"}
    for block in _spark_blocks(path):
        _run(block, node, spark, namespace, tmp_path)


def test_the_spark_copy_example_copies_the_topic(node: RunningNode, spark: Any) -> None:
    # After docs/spark.md ran (parametrized above, in file order): its sink wrote every record of events.
    copied = consume_all(node.bootstrap_servers, "copy", 2)
    assert sorted((k, v) for _p, _o, k, v, _h in copied) == sorted(EVENTS)
