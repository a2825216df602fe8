"""The fault campaign's CI smoke run (issue 32): one seed, 75 s of faults on a 3 + 3 cluster with every
workload, then zero anomalies of every class. Longer runs: ``make faults SEED=N DURATION=S``."""

from __future__ import annotations

import os

from tests.faults.campaign import run_campaign
from tests.faults.report import render

SMOKE_SEED = int(os.environ.get("FAULTS_SMOKE_SEED", "1"))
SMOKE_DURATION_S = 75.0


def test_a_short_fault_campaign_finds_no_anomaly() -> None:
    result = run_campaign(SMOKE_SEED, SMOKE_DURATION_S)
    report = render(result)
    print(report)
    assert result.ok, report
    assert result.check.acknowledged > 0 and result.check.committed_txns > 0
