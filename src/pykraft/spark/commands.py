"""``pykraft pipeline pid-audit|eos-verify ...``: the Spark pipelines from the command line.

Runs on ``local[*]`` unless ``--master`` says otherwise (``--master spark://host:7077``, ``yarn``,
``k8s://...``), or through Spark Connect with ``--remote sc://host:15002``. Under spark-submit, a
two-line driver script ``import sys, pykraft.cli; sys.exit(pykraft.cli.main(sys.argv[1:]))`` uses
the session spark-submit configured (an active session is reused, never stopped). Executors need
pykraft installed (or shipped with ``--py-files``) and, for eos-verify over the network, reach to the
brokers.
Exit status: 0 clean, 1 a violation was found, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def add_subcommands(sub: Any) -> None:
    pipeline = sub.add_parser(
        "pipeline", help="run a Spark pipeline (producer-ID audit, exactly-once verifier)"
    )
    psub = pipeline.add_subparsers(dest="pipeline_command", required=True)

    def common(p: argparse.ArgumentParser, out_default: str) -> None:
        p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
        p.add_argument("--remote", default=None, help="Spark Connect URL, e.g. sc://host:15002")
        p.add_argument("--out", default=out_default, help=f"output directory (default {out_default})")

    audit = psub.add_parser("pid-audit", help="audit producer-ID block allocations in a metadata log")
    audit.add_argument("--metadata-dir", required=True, help="metadata.log.dir (or its __cluster_metadata-0)")
    common(audit, "pid-audit-out")
    audit.set_defaults(func=_pid_audit)

    eos = psub.add_parser("eos-verify", help="check a topic for duplicated, missing or reordered records")
    source = eos.add_mutually_exclusive_group(required=True)
    source.add_argument("--bootstrap-server", help="HOST:PORT of a running broker")
    source.add_argument("--data-dir", help="a broker's log.dirs, read from its segment files")
    eos.add_argument("--topic", required=True)
    eos.add_argument(
        "--command-config",
        help="Kafka client properties (security.protocol, sasl.*, ssl.*), as the other tools take them",
    )
    eos.add_argument("--expected", help="file with one expected record value per line (finds lost records)")
    eos.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed skips aborted transactions (verify a transactional writer's output)",
    )
    common(eos, "eos-verify-out")
    eos.set_defaults(func=_eos_verify)

    demo = psub.add_parser(
        "eos-demo",
        help="write rows with the Spark sink at-least-once and exactly-once while tasks fail and retry, "
        "then eos-verify both",
    )
    demo.add_argument("--bootstrap-server", required=True, help="HOST:PORT of a running broker")
    demo.add_argument("--rows", type=int, default=2000)
    demo.add_argument(
        "--command-config",
        help="Kafka client properties (security.protocol, sasl.*, ssl.*), as the other tools take them",
    )
    common(demo, "eos-demo-out")
    demo.set_defaults(func=_eos_demo)


class _Session:
    """The active SparkSession if there is one (tests, notebooks), else a new one that we stop."""

    def __init__(self, args: argparse.Namespace, app: str) -> None:
        self.args = args
        self.app = app
        self.owned = False
        self.spark: Any = None

    def __enter__(self) -> Any:
        # Spark's Python workers must run this interpreter (pyspark-facts.md §3.6).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            self.spark = active
            return active
        builder = SparkSession.builder.appName(self.app)
        if self.args.remote:
            builder = builder.remote(self.args.remote)
        else:
            builder = builder.master(self.args.master or "local[*]").config(
                "spark.ui.showConsoleProgress", "false"
            )
        self.spark = builder.getOrCreate()
        if not self.args.remote:
            self.spark.sparkContext.setLogLevel("ERROR")
        self.owned = True
        return self.spark

    def __exit__(self, *exc: object) -> None:
        if self.owned and self.spark is not None:
            self.spark.stop()


def _client_options(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``--command-config`` properties as ``kafka.*`` options; None (after one line on stderr)
    when the file cannot be read."""
    from pykraft.core.config import ConfigError, parse_properties
    from pykraft.spark.pipelines import client_options_of

    if args.command_config is None:
        return {}
    try:
        with open(args.command_config, encoding="utf-8") as fh:
            return client_options_of(parse_properties(fh.read()))
    except OSError as exc:
        print(
            f"pykraft: --command-config: cannot read {args.command_config}: {exc.strerror}", file=sys.stderr
        )
    except ConfigError as exc:
        print(f"pykraft: --command-config: {exc}", file=sys.stderr)
    return None


def _report(title: str, result: Any) -> int:
    from pykraft.spark.pipelines import format_table

    print(title)
    print(format_table(result.summary))
    for path in result.outputs:
        print(f"wrote {path}")
    if result.violations:
        print(f"VIOLATIONS ({len(result.violations)}):")
        for v in result.violations:
            print(f"  {v}")
        return 1
    print("OK: no violations")
    return 0


def _pid_audit(args: argparse.Namespace) -> int:
    from pykraft.spark.audit import metadata_files
    from pykraft.spark.pipelines import run_pid_audit

    try:
        metadata_files(args.metadata_dir)
    except FileNotFoundError as exc:
        print(f"pykraft: {exc}", file=sys.stderr)
        return 2
    with _Session(args, "pykraft-pid-audit") as spark:
        result = run_pid_audit(spark, args.metadata_dir, args.out)
    return _report("producer-ID block allocations per broker", result)


def _eos_verify(args: argparse.Namespace) -> int:
    from pykraft.spark.pipelines import load_topic, run_eos_verify

    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        print(f"pykraft: --data-dir: {args.data_dir} is not a directory", file=sys.stderr)
        return 2
    if args.expected is not None and not os.path.isfile(args.expected):
        print(f"pykraft: --expected: {args.expected} is not a file", file=sys.stderr)
        return 2
    client_options = _client_options(args)
    if client_options is None:
        return 2
    with _Session(args, "pykraft-eos-verify") as spark:
        df = load_topic(
            spark,
            args.topic,
            bootstrap=args.bootstrap_server,
            data_dir=args.data_dir,
            isolation_level=args.isolation_level,
            client_options=client_options,
        )
        result = run_eos_verify(
            spark, df, args.expected, args.out, read_committed=args.isolation_level == "read_committed"
        )
    return _report(f"exactly-once check of topic {args.topic} per partition and producer", result)


def _eos_demo(args: argparse.Namespace) -> int:
    from pykraft.spark.pipelines import format_table, run_eos_demo

    if args.rows < 1:
        print("pykraft: --rows: must be at least 1", file=sys.stderr)
        return 2
    client_options = _client_options(args)
    if client_options is None:
        return 2
    # Tasks must be retried: local mode retries only with local[N,F].
    args.master = args.master or "local[2,2]"
    with _Session(args, "pykraft-eos-demo") as spark:
        table, ok = run_eos_demo(spark, args.bootstrap_server, args.rows, args.out, client_options)
    print("the Spark sink with every task's first attempt failing after its records were committed")
    print(format_table(table))
    print(
        "OK: exactly-once wrote every row once; at-least-once repeated the retried tasks' rows"
        if ok
        else "UNEXPECTED"
    )
    return 0 if ok else 1
