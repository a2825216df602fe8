"""``pykraft dev cluster``: a local cluster on 127.0.0.1 for people to try: a KRaft quorum of controller
processes and, with ``--brokers``, broker processes that clients connect to.

Writes one Kafka-style properties file per node into ``--dir``, starts each node as its own process
(``pykraft server start --config``), prints where each listens and how to look at the quorum, and
stops them all on Ctrl-C (or SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def _cluster(args: argparse.Namespace) -> int:
    if args.controllers < 1:
        print(f"pykraft dev cluster: --controllers {args.controllers}: must be at least 1", file=sys.stderr)
        return 2
    if args.brokers < 0:
        print(f"pykraft dev cluster: --brokers {args.brokers}: must be 0 or more", file=sys.stderr)
        return 2
    directory = os.path.abspath(args.dir)
    if os.path.isdir(directory) and os.listdir(directory):
        print(
            f"pykraft dev cluster: --dir {directory}: not empty; give a new or empty directory",
            file=sys.stderr,
        )
        return 2
    # Imported here: pykraft.testing brings pytest, and every other command would pay for it.
    from pykraft.testing import ProcessCluster

    cluster = ProcessCluster.create(directory, args.controllers, brokers=args.brokers)
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cluster.start()
    for node in cluster.nodes.values():
        print(f"{node.role} {node.node_id}: {node.address}  config {node.config_path}  log {node.log_path}")
    first = next(iter(cluster.controllers.values()))
    print(f"quorum: pykraft metadata quorum --bootstrap-controller {first.address} describe --status")
    if cluster.brokers:
        print(f"clients: bootstrap.servers={cluster.bootstrap_servers}")
    print("Ctrl-C stops them all.", flush=True)
    try:
        while not stopping:
            for node in cluster.nodes.values():
                if node.process is not None and node.process.poll() is not None:
                    print(
                        f"{node.role} {node.node_id} exited with {node.process.returncode}; see {node.log_path}"
                    )
                    node.process = None
            time.sleep(0.2)
    finally:
        print("stopping the cluster", flush=True)
        cluster.stop()
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser("dev", help="development helpers (a local cluster)")
    sub = dev.add_subparsers(dest="dev_command", required=True)
    cluster = sub.add_parser("cluster", help="run controller and broker processes on 127.0.0.1")
    cluster.add_argument("--controllers", type=int, default=3, help="how many controllers (default 3)")
    cluster.add_argument("--brokers", type=int, default=0, help="how many brokers (default 0)")
    cluster.add_argument("--dir", required=True, metavar="DIR", help="where configs, data and logs go")
    cluster.set_defaults(func=_cluster)


__all__ = ["add_subcommands"]
