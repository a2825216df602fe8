"""The fault campaign's CI smoke run (issue 32): one seed, 75 s of faults on a 3 + 3 cluster with every
workload, then zero anomalies of every class. Longer runs: ``make faults SEED=N DURATION=S``.

Seed 31 draws kill -9 of a broker and of a partition leader, paused partition leaders and transaction
coordinators (past broker.session.timeout.ms: the paused-coordinator scenario), and cuts of a broker's
client and replication paths; no disk_full, which needs mount rights CI may not have. It replaces
test_replication.py's ten leader kills under an idempotent acks=all producer (the checker's LOST,
DUPLICATE, REORDER and REPLICA_DIVERGENCE judge the same)."""

from __future__ import annotations

import os

from tests.faults.campaign import run_campaign
from tests.faults.report import render

SMOKE_SEED = int(os.environ.get("FAULTS_SMOKE_SEED", "31"))
SMOKE_DURATION_S = 75.0


def test_a_short_fault_campaign_finds_no_anomaly() -> None:
    result = run_campaign(SMOKE_SEED, SMOKE_DURATION_S)
    report = render(result)
    print(report)
    assert not result.workload_failures, report
    assert result.ok, report
    assert result.check.acknowledged > 0 and result.check.committed_txns > 0
