"""The fault campaign's CI smoke run (issue 32): one seed, 75 s of faults on a 3 + 3 cluster with every
workload, then zero anomalies of every class but the two findings below, which are printed, not
asserted, until they are decided. Longer runs: ``make faults SEED=N DURATION=S`` (asserts every class)."""

from __future__ import annotations

import os

from tests.faults.campaign import run_campaign
from tests.faults.report import render

SMOKE_SEED = int(os.environ.get("FAULTS_SMOKE_SEED", "1"))
SMOKE_DURATION_S = 75.0


# Findings of issue 32's campaign that behave as Kafka does (see the issue's report):
# - OFFSET_BACKWARDS: a coordinator paused (SIGSTOP) past broker.session.timeout.ms answers the
#   OffsetFetch requests queued in its socket from its stale state right after SIGCONT, before it has
#   read the metadata that moved the group away; Kafka's coordinators hold no read lease either.
# - FATAL_CLIENT_ERROR "abort: INVALID_TXN_STATE": librdkafka sends EndTxn(abort) after an
#   AddPartitionsToTxn whose answer it never got (it went to the paused coordinator); the new
#   coordinator has the transaction Empty and answers INVALID_TXN_STATE, as Kafka's
#   TransactionCoordinator.endTransactionWithTV1 does for Empty.
def _unexplained(name: str, found: list[str]) -> list[str]:
    if name == "OFFSET_BACKWARDS":
        return []
    if name == "FATAL_CLIENT_ERROR":
        return [line for line in found if "abort: INVALID_TXN_STATE" not in line]
    return found


def test_a_short_fault_campaign_finds_no_anomaly() -> None:
    result = run_campaign(SMOKE_SEED, SMOKE_DURATION_S)
    report = render(result)
    print(report)
    assert not result.workload_failures, report
    unexplained = {name: _unexplained(name, found) for name, found in result.check.anomalies.items()}
    assert not any(unexplained.values()), report
    assert result.check.acknowledged > 0 and result.check.committed_txns > 0
