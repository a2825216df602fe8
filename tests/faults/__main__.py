"""``python -m tests.faults --seed N --duration S``: one fault campaign (``make faults SEED= DURATION=``).
Prints the report, appends it to ``--report`` if given; exits 1 when the checker found an anomaly."""

from __future__ import annotations

import argparse
import os
import pickle
import sys

from tests.faults.campaign import CampaignResult, run_campaign
from tests.faults.checker import check
from tests.faults.nemesis import KINDS
from tests.faults.report import render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--duration", type=float, help="seconds of faults")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated fault kinds (default: all)")
    parser.add_argument("--report", help="append the Markdown report to this file")
    parser.add_argument("--keep", help="run in this directory and keep it (node and client logs)")
    parser.add_argument("--recheck", help="check again the history.pickle a kept run left in this directory")
    args = parser.parse_args(argv)
    if args.recheck:
        with open(os.path.join(args.recheck, "history.pickle"), "rb") as fh:
            history = pickle.load(fh)  # written by this harness only
        result = CampaignResult(
            args.seed or 0, args.duration or 0.0, KINDS, history, check(history), [], args.recheck
        )
        print(render(result))
        return 0 if result.ok else 1
    if args.seed is None or args.duration is None:
        parser.error("--seed and --duration are needed (or --recheck DIR)")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"--kinds: unknown fault kind(s) {unknown}; known: {','.join(KINDS)}")
    result = run_campaign(args.seed, args.duration, kinds, args.keep)
    text = render(result)
    print(text)
    if args.report:
        with open(args.report, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
